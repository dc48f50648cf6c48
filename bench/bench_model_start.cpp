// How soon a model is ready in a fresh process: svod::Model::load of a
// package with one large constant, beside ONNX Runtime's session creation for
// an ONNX model of the same size; and a freshly loaded model's first call
// against its second.
//
//     build/release/bench/bench_model_start [--mb 100] [--processes 7] [--node-modules DIR] [--keep]
//
// The program writes, in a temporary folder, y = x W (x [1, K], W [K, K] f32,
// K chosen so that W holds about --mb MB): as a package (`svod pack` of a plan
// file whose W is a .npy file), the same package signed, and as an ONNX model
// (one MatMul, W an initializer with raw data; the protobuf is written here,
// no onnx package needed). Then it runs itself as children, one kind after
// another in each round:
//   package         Model::load of the package, then two calls (x set by name);
//   package, signed the same with the signature checked;
//   small           a small package (16 core_id slices over a 4 KiB constant):
//                   its load and its first and second call, which a thread pool
//                   that is not started yet makes differ;
//   onnxruntime     node's onnxruntime-node (bench/real_models/install.sh puts it
//                   in build/real_models; --node-modules names another folder):
//                   InferenceSession.create of the ONNX model, then two runs.
// Every file has been read once before, so each load reads from the page
// cache. Prints the medians of each figure; --keep leaves the files in the
// temporary folder (for a profiler).
// Not a Google Benchmark: it has its own main (bench/CMakeLists.txt).
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "svod/base/npy.h"
#include "svod/base/subprocess.h"
#include "svod/package/model.h"
#include "svod/package/package.h"
#include "svod/package/signature.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// y[n] = sum_k x[k] W[k, n], over CORES slices of the columns.
constexpr const char* kMatvec =
    "void matvec(float* restrict y, const float* restrict x, const float* restrict w, int core_id) {\n"
    "  const int chunk = K / CORES, n0 = core_id * chunk;\n"
    "  for (int n = n0; n < n0 + chunk; ++n) y[n] = 0;\n"
    "  for (int k = 0; k < K; ++k) {\n"
    "    const float xk = x[k];\n"
    "    const float* row = w + (long)k * K;\n"
    "    for (int n = n0; n < n0 + chunk; ++n) y[n] += xk * row[n];\n"
    "  }\n"
    "}\n";

// A plan file for y = x W, W [k, k] from w.npy, in `folder`.
void write_plan(const fs::path& folder, size_t k) {
  std::vector<float> w(k * k);
  std::mt19937 random(7);
  std::uniform_real_distribution<float> uniform(-1, 1);
  for (float& v : w) v = uniform(random);
  const size_t shape[] = {k, k};
  svod::write_npy(folder / "w.npy", svod::DType::F32, shape, std::as_bytes(std::span(w)));
  std::string source;
  for (const char c : std::string(kMatvec)) {
    if (c == '\n') source += "\\n";
    else source += c;
  }
  std::ofstream(folder / "plan.json") << fmt::format(R"({{
  "svod_plan": 1,
  "buffers": {{
    "x": {{ "dtype": "f32", "shape": [1, {0}], "role": "input" }},
    "w": {{ "dtype": "f32", "shape": [{0}, {0}], "init": {{ "npy": "w.npy" }}, "role": "constant" }},
    "y": {{ "dtype": "f32", "shape": [1, {0}], "role": "output" }}
  }},
  "programs": {{
    "matvec": {{ "language": "c", "entry": "matvec", "source": "{1}",
      "defines": {{ "K": {0}, "CORES": 16 }},
      "buffers": [ {{ "name": "y", "access": "write" }}, {{ "name": "x" }}, {{ "name": "w" }} ],
      "scalars": [ {{ "name": "core_id", "type": "i32" }} ], "global_size": [16, 1, 1] }}
  }},
  "ops": [ {{ "run": "matvec", "buffers": ["y", "x", "w"] }} ],
  "outputs": {{ "y": {{}} }}
}}
)",
                                                     k, source);
  // The ONNX model's weights, the same bytes.
  std::ofstream(folder / "w.bin", std::ios::binary).write(reinterpret_cast<const char*>(w.data()),
                                                          static_cast<std::streamsize>(w.size() * sizeof(float)));
}

// --- a protobuf writer, enough for an ONNX model ---

void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>(v | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
void field_varint(std::string& out, int field, uint64_t v) {
  varint(out, static_cast<uint64_t>(field) << 3);
  varint(out, v);
}
void field_bytes(std::string& out, int field, std::string_view bytes) {
  varint(out, (static_cast<uint64_t>(field) << 3) | 2);
  varint(out, bytes.size());
  out.append(bytes);
}

// ValueInfoProto of a float tensor [1, k].
std::string value_info(std::string_view name, size_t k) {
  std::string shape, dim1, dimk, tensor, type, info;
  field_varint(dim1, 1, 1);
  field_varint(dimk, 1, k);
  field_bytes(shape, 1, dim1);
  field_bytes(shape, 1, dimk);
  field_varint(tensor, 1, 1);  // elem_type FLOAT
  field_bytes(tensor, 2, shape);
  field_bytes(type, 1, tensor);  // tensor_type
  field_bytes(info, 1, name);
  field_bytes(info, 2, type);
  return info;
}

// model.onnx: y = MatMul(x, W), opset 13, W's raw data from w.bin.
void write_onnx(const fs::path& folder, size_t k) {
  std::ifstream in(folder / "w.bin", std::ios::binary);
  const std::string weights((std::istreambuf_iterator<char>(in)), {});
  std::string node, initializer, graph, opset, model;
  field_bytes(node, 1, "x");
  field_bytes(node, 1, "W");
  field_bytes(node, 2, "y");
  field_bytes(node, 4, "MatMul");
  field_varint(initializer, 1, k);
  field_varint(initializer, 1, k);
  field_varint(initializer, 2, 1);  // FLOAT
  field_bytes(initializer, 8, "W");
  field_bytes(initializer, 9, weights);
  field_bytes(graph, 1, node);
  field_bytes(graph, 2, "matvec");
  field_bytes(graph, 5, initializer);
  field_bytes(graph, 11, value_info("x", k));
  field_bytes(graph, 12, value_info("y", k));
  field_bytes(opset, 1, "");
  field_varint(opset, 2, 13);
  field_varint(model, 1, 8);  // ir_version
  field_bytes(model, 7, graph);
  field_bytes(model, 8, opset);
  std::ofstream(folder / "model.onnx", std::ios::binary).write(model.data(), static_cast<std::streamsize>(model.size()));
  fs::remove(folder / "w.bin");
}

// ONNX Runtime's side, run by node: create the session, then two runs.
constexpr const char* kOrtScript = R"(
const ort = require(require("path").join(process.argv[2], "onnxruntime-node"));
const k = Number(process.argv[4]);
(async () => {
  let t = process.hrtime.bigint();
  const ms = () => { const now = process.hrtime.bigint(); const d = Number(now - t) / 1e6; t = now; return d; };
  const session = await ort.InferenceSession.create(process.argv[3]);
  const load = ms();
  const x = new ort.Tensor("float32", new Float32Array(k).fill(0.5), [1, k]);
  await session.run({ x });
  const first = ms();
  await session.run({ x });
  const second = ms();
  console.log(`load_ms=${load} first_ms=${first} second_ms=${second}`);
})();
)";

// --- children: print one line of figures ---

int child_svod(const char* path) {
  auto start = Clock::now();
  svod::Model model = svod::Model::load(path);
  const double load = ms_since(start);
  const svod::ModelPort x = model.input("x");
  const std::vector<float> data(x.count(), 0.5f);
  start = Clock::now();
  model.set_input("x", svod::DType::F32, x.shape, std::as_bytes(std::span(data)));
  model.run();
  const double first = ms_since(start);
  start = Clock::now();
  model.set_input("x", svod::DType::F32, x.shape, std::as_bytes(std::span(data)));
  model.run();
  const double second = ms_since(start);
  std::printf("load_ms=%.3f first_ms=%.3f second_ms=%.3f\n", load, first, second);
  return 0;
}

struct ChildRun {
  std::map<std::string, double> figures;
  bool ok = false;
};

// Runs a child (svod's run_process) and reads the NAME=VALUE figures it printed.
ChildRun run_child(const std::vector<std::string>& args) {
  const svod::ProcessResult done = svod::run_process(args, "", std::chrono::minutes(10));
  ChildRun r;
  r.ok = done.ok();
  const std::string& text = done.out;
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find_first_of(" \n", at), text.size());
    const std::string field = text.substr(at, end - at);
    if (const size_t eq = field.find('='); eq != std::string::npos)
      r.figures[field.substr(0, eq)] = std::atof(field.c_str() + eq + 1);
    at = end + 1;
  }
  return r;
}

int parent(size_t mb, int processes, fs::path node_modules, bool keep) {
  char name[] = "/tmp/svod_model_start_XXXXXX";
  if (::mkdtemp(name) == nullptr) std::abort();
  const fs::path folder = name;
  const size_t k = (static_cast<size_t>(std::ceil(std::sqrt(mb * 1e6 / 4))) + 15) / 16 * 16;
  write_plan(folder, k);
  const fs::path package = folder / "model.svodpkg", signed_package = folder / "signed.svodpkg";
  std::vector<std::byte> bytes = svod::pack_plan(folder / "plan.json");
  svod::write_package(package, bytes);
  bool have_signed = true;
  try {
    svod::generate_key_pair(folder / "key");
    svod::write_package(signed_package, svod::sign_package(std::move(bytes), svod::read_secret_key(folder / "key.key")));
  } catch (const svod::Error& e) {
    have_signed = false;
    std::printf("no signed package: %s\n", e.what());
  }
  // The small package: 16 slices over a 32x32 constant.
  const fs::path small_folder = folder / "small";
  fs::create_directory(small_folder);
  write_plan(small_folder, 32);
  svod::write_package(folder / "small.svodpkg", svod::pack_plan(small_folder / "plan.json"));
  write_onnx(folder, k);
  std::ofstream(folder / "ort.js") << kOrtScript;
  const bool have_ort = fs::exists(node_modules / "onnxruntime-node");
  if (!have_ort) std::printf("no onnxruntime-node in %s (bench/real_models/install.sh)\n", node_modules.c_str());

  const std::string self = fs::read_symlink("/proc/self/exe").string();
  struct Kind {
    std::string label;
    std::vector<std::string> args;
    std::vector<ChildRun> runs;
  };
  std::vector<Kind> kinds = {{"package", {self, "--child", package.string()}, {}},
                             {"small package", {self, "--child", (folder / "small.svodpkg").string()}, {}}};
  if (have_signed) kinds.push_back({"package, signed", {self, "--child", signed_package.string()}, {}});
  if (have_ort)
    kinds.push_back({"onnxruntime", {"node", (folder / "ort.js").string(), node_modules.string(),
                                     (folder / "model.onnx").string(), std::to_string(k)}, {}});
  for (Kind& kind : kinds) (void)run_child(kind.args);  // files into the page cache
  for (int round = 0; round < processes; ++round)
    for (Kind& kind : kinds) {
      ChildRun r = run_child(kind.args);
      if (!r.ok) std::fprintf(stderr, "bench_model_start: %s failed\n", kind.label.c_str());
      else kind.runs.push_back(std::move(r));
    }
  std::printf("W: %zu x %zu f32 (%.1f MB); package %.1f MB, model.onnx %.1f MB; %d fresh processes each, medians\n",
              k, k, k * k * 4 / 1e6, fs::file_size(package) / 1e6, fs::file_size(folder / "model.onnx") / 1e6,
              processes);
  for (const Kind& kind : kinds) {
    auto figure = [&](const char* name) {
      std::vector<double> v;
      for (const ChildRun& r : kind.runs) v.push_back(r.figures.count(name) ? r.figures.at(name) : 0);
      return median(v);
    };
    std::vector<double> extra;
    for (const ChildRun& r : kind.runs) extra.push_back(r.figures.at("first_ms") - r.figures.at("second_ms"));
    std::printf("%-16s load %8.2f ms, first call %7.3f ms, second %7.3f ms, first minus second %6.3f ms\n",
                kind.label.c_str(), figure("load_ms"), figure("first_ms"), figure("second_ms"), median(extra));
  }
  if (keep) std::printf("the files are in %s\n", folder.c_str());
  else fs::remove_all(folder);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--child") == 0) return child_svod(argv[2]);
  size_t mb = 100;
  int processes = 7;
  fs::path node_modules = fs::path(SVOD_BINARY_DIR) / "real_models/node_modules";
  bool keep = false;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--keep") == 0) keep = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--mb") == 0) mb = std::stoul(argv[i + 1]);
    else if (std::strcmp(argv[i], "--processes") == 0) processes = std::stoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--node-modules") == 0) node_modules = argv[i + 1];
  }
  return parent(mb, processes, node_modules, keep);
}
