// ShortName: a name of one to 15 lower-case letters, digits and '_' (a
// letter first), held by value. svod uses it for the open sets a device
// extends — the languages of ProgramSpec and the kinds of Artifact — so that
// a backend declares its own as constants in its folder, plan files, packages
// and caches carry them as text, and nothing central lists them. Constant,
// trivially copyable and compared by content; a malformed name is a compile
// error in a constant and Error(Validation) at run time.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "svod/base/error.h"

namespace svod {

// `Tag` keeps two kinds of names apart (a Language is no ArtifactKind).
template <typename Tag>
class ShortName {
 public:
  static constexpr size_t kMaxSize = 15;

  // `what` names the set in the error ("language").
  constexpr ShortName(std::string_view name, std::string_view what) {
    if (!well_formed(name))
      throw make_error(ErrorKind::Validation,
                       "{} \"{}\": names are 1 to {} lower-case letters, digits and '_', a letter first", what, name,
                       kMaxSize);
    for (size_t i = 0; i < name.size(); ++i) text_[i] = name[i];
    size_ = static_cast<unsigned char>(name.size());
  }

  static constexpr bool well_formed(std::string_view name) noexcept {
    if (name.empty() || name.size() > kMaxSize || name[0] < 'a' || name[0] > 'z') return false;
    for (char c : name)
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
    return true;
  }

  constexpr std::string_view name() const noexcept { return {text_, size_}; }
  friend constexpr bool operator==(const ShortName&, const ShortName&) = default;

 private:
  char text_[kMaxSize] = {};
  unsigned char size_ = 0;
};

}  // namespace svod
