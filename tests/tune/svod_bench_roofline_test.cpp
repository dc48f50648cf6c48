// `svod bench --plot`: the roofline as a user gets it from the real binary,
// checked the way a reader looks at it. Every plotted op is at or below its
// roof or marked beside its point; no two texts overlap, judged by boxes
// estimated from each text's position, anchor, font size and length; nothing
// lies outside the picture; ops without flops and bytes are listed; the peaks
// are cached with the way they were measured; and rsvg-convert, when
// installed (librsvg2-bin), renders the file.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "svod/base/subprocess.h"
#include "tests/support/temp_dir.h"

namespace svod {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// `svod bench PLAN --plot SVG` with its own object cache (and so its own
// machine.json). The DRAM roof streams four times the last-level cache; the
// tests say it is 16 MiB (SVOD_LLC_SIZE), so that each measures over 192 MiB
// in well under a second, whatever cache this machine has (one of hundreds
// of MiB would cost every test seconds of page faults).
ProcessResult bench_plot(const fs::path& plan, const fs::path& svg, const fs::path& cache,
                         const std::string& llc_size = "16M") {
  return run_process({"env", "SVOD_CACHE_DIR=" + cache.string(), "SVOD_LLC_SIZE=" + llc_size, SVOD_BINARY_DIR "/svod",
                      "bench", plan.string(), "--runs", "3", "--min-time-ms", "0", "--plot", svg.string()},
                     "", std::chrono::minutes(2));
}

std::map<std::string, std::string> attributes(const std::string& tag) {
  static const std::regex attribute(R"re(([\w:-]+)="([^"]*)")re");
  std::map<std::string, std::string> out;
  for (auto it = std::sregex_iterator(tag.begin(), tag.end(), attribute); it != std::sregex_iterator(); ++it)
    out[(*it)[1]] = (*it)[2];
  return out;
}

struct Box {
  double x0, y0, x1, y1;
  bool overlaps(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
};

std::string unescape(std::string s) {
  for (const auto& [from, to] : {std::pair{"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&amp;", "&"}})
    for (size_t at; (at = s.find(from)) != std::string::npos;) s.replace(at, std::string_view(from).size(), to);
  return s;
}

struct Text {
  std::map<std::string, std::string> attrs;
  std::string text;
  // What a sans-serif face covers: 0.6 em a character on average (DejaVu
  // Sans, what rsvg-convert picks on Debian), 0.75 em above the baseline and
  // 0.2 em below.
  Box box() const {
    const double size = std::stod(attrs.at("font-size")), x = std::stod(attrs.at("x")), y = std::stod(attrs.at("y"));
    size_t glyphs = 0;
    for (char c : text) glyphs += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    const double w = static_cast<double>(glyphs) * 0.6 * size;
    const std::string anchor = attrs.count("text-anchor") ? attrs.at("text-anchor") : "start";
    const double x0 = anchor == "end" ? x - w : anchor == "middle" ? x - w / 2 : x;
    return {x0, y - 0.75 * size, x0 + w, y + 0.2 * size};
  }
};

struct Point {
  std::map<std::string, std::string> attrs;
  double cx = 0, cy = 0, r = 0;
};

// The parts of the picture the checks look at.
struct Roofline {
  double width = 0, height = 0;
  double gflops = 0, cache_gbps = 0;  // the roofs that bound every op
  std::vector<Text> texts;
  std::vector<Point> points;
};

Roofline parse(const std::string& svg) {
  Roofline r;
  std::smatch m;
  EXPECT_TRUE(std::regex_search(svg, m, std::regex(R"re(viewBox="0 0 ([\d.]+) ([\d.]+)")re")));
  r.width = std::stod(m[1]);
  r.height = std::stod(m[2]);
  EXPECT_TRUE(std::regex_search(svg, m, std::regex(R"re(<polyline class="roof"[^>]*>)re")));
  const auto roof = attributes(m[0]);
  r.gflops = std::stod(roof.at("data-gflops"));
  r.cache_gbps = std::stod(roof.at("data-cache-gbps"));
  static const std::regex text(R"re(<text ([^>]*)>([^<]*)</text>)re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), text); it != std::sregex_iterator(); ++it)
    r.texts.push_back({attributes((*it)[1]), unescape((*it)[2])});
  static const std::regex op(R"re(<g class="op"[^>]*>.*?<circle [^>]*>)re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), op); it != std::sregex_iterator(); ++it) {
    const std::string group = (*it)[0];
    const auto circle = attributes(group.substr(group.find("<circle")));
    r.points.push_back({attributes(group.substr(0, group.find('>'))), std::stod(circle.at("cx")),
                        std::stod(circle.at("cy")), std::stod(circle.at("r"))});
  }
  return r;
}

// Everything a reader relies on; `unplotted` are labels the picture must list.
void check_roofline(const fs::path& svg_path, const std::vector<std::string>& unplotted) {
  const std::string svg = read_text(svg_path);
  const Roofline r = parse(svg);
  ASSERT_GT(r.gflops, 0);
  ASSERT_GT(r.cache_gbps, 0);
  const Box view{0, 0, r.width, r.height};

  // Inside the picture, and no text over another.
  for (const Text& t : r.texts) {
    const Box b = t.box();
    EXPECT_TRUE(b.x0 >= 0 && b.y0 >= 0 && b.x1 <= view.x1 && b.y1 <= view.y1) << "outside the picture: " << t.text;
  }
  for (size_t i = 0; i < r.texts.size(); ++i)
    for (size_t j = i + 1; j < r.texts.size(); ++j)
      EXPECT_FALSE(r.texts[i].box().overlaps(r.texts[j].box()))
          << "\"" << r.texts[i].text << "\" overlaps \"" << r.texts[j].text << "\"";

  // Every line too: grid, roofs, leader lines.
  auto inside = [&](double x, double y) { return x >= 0 && y >= 0 && x <= view.x1 && y <= view.y1; };
  static const std::regex line(R"re(<line [^>]*>)re"), polyline(R"re(<polyline [^>]*>)re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), line); it != std::sregex_iterator(); ++it) {
    const auto a = attributes((*it)[0]);
    EXPECT_TRUE(inside(std::stod(a.at("x1")), std::stod(a.at("y1")))) << (*it)[0];
    EXPECT_TRUE(inside(std::stod(a.at("x2")), std::stod(a.at("y2")))) << (*it)[0];
  }
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), polyline); it != std::sregex_iterator(); ++it) {
    std::istringstream points(attributes((*it)[0]).at("points"));
    double x = 0, y = 0;
    char comma = 0;
    while (points >> x >> comma >> y) EXPECT_TRUE(inside(x, y)) << (*it)[0];
  }

  // Every point inside, covered by no text, and at or below its roof or
  // marked: red, and its label says by how much.
  std::map<std::string, const Text*> labels;
  for (const Text& t : r.texts)
    if (t.attrs.count("class") && t.attrs.at("class") == "label") labels[t.attrs.at("data-n")] = &t;
  for (const Point& p : r.points) {
    const std::string n = p.attrs.at("data-n");
    const Box dot{p.cx - p.r, p.cy - p.r, p.cx + p.r, p.cy + p.r};
    EXPECT_TRUE(dot.x0 >= 0 && dot.y0 >= 0 && dot.x1 <= view.x1 && dot.y1 <= view.y1) << "point " << n;
    for (const Text& t : r.texts) EXPECT_FALSE(t.box().overlaps(dot)) << "\"" << t.text << "\" covers point " << n;
    ASSERT_TRUE(labels.count(n)) << "point " << n << " has no label";
    EXPECT_EQ(labels[n]->text.substr(0, n.size()), n);
    const double gflops = std::stod(p.attrs.at("data-gflops")), intensity = std::stod(p.attrs.at("data-intensity"));
    const double roof = std::min(r.gflops, r.cache_gbps * intensity);
    // The attributes keep six digits: a point within that of its roof is at it.
    if (gflops > roof * (1 + 1e-5)) {
      EXPECT_EQ(p.attrs.at("data-above"), "true") << "point " << n << " above its roof, unmarked";
      EXPECT_NE(labels[n]->text.find(" roof"), std::string::npos) << labels[n]->text;
    }
  }

  // The ops without a point, each listed.
  std::string listed;
  for (const Text& t : r.texts)
    if (t.attrs.count("class") && t.attrs.at("class") == "unplotted") listed += t.text + "\n";
  for (const std::string& label : unplotted)
    EXPECT_NE(listed.find(label), std::string::npos) << label << " in\n" << listed;

  if (fs::exists("/usr/bin/rsvg-convert")) {
    const fs::path png = fs::path(svg_path).replace_extension(".png");
    const ProcessResult rendered =
        run_process({"/usr/bin/rsvg-convert", svg_path.string(), "-o", png.string()}, "", std::chrono::seconds(60));
    EXPECT_TRUE(rendered.ok()) << rendered.err;
    EXPECT_EQ(read_text(png).substr(1, 3), "PNG");
  }
}

TEST(SvodBenchRoofline, MlpEveryKernelPlottedAndTheSoftmaxListed) {
  test::TempDir dir;
  const ProcessResult r = bench_plot(SVOD_SOURCE_DIR "/examples/mlp/plan.json", dir / "mlp.svg", dir / "cache");
  ASSERT_TRUE(r.ok()) << r.err;
  EXPECT_NE(r.out.find("wrote " + (dir / "mlp.svg").string() + " (peak "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("; 3 ops plotted, 1 listed as not plotted)"), std::string::npos) << r.out;
  check_roofline(dir / "mlp.svg", {"op 3 (softmax) kernel softmax — no flop/byte counts"});
  // Each op in the table by its full label.
  const std::string svg = read_text(dir / "mlp.svg");
  for (const char* label : {">op 0 (layer1) kernel layer1</text>", ">op 1 (layer2) kernel layer2</text>"})
    EXPECT_NE(svg.find(label), std::string::npos) << label;

  // The peaks are kept for this machine with how they were measured.
  const auto doc = nlohmann::json::parse(read_text(dir / "cache" / "machine.json"));
  EXPECT_GT(doc["gflops"].get<double>(), 0);
  EXPECT_GT(doc["dram_gbps"].get<double>(), 0);
  EXPECT_GT(doc["cache_gbps"].get<double>(), doc["dram_gbps"].get<double>());
  EXPECT_NE(doc["method"].get<std::string>().find("f32 FMA"), std::string::npos) << doc.dump();
  EXPECT_NE(svg.find("f32 FMA"), std::string::npos);
}

// The dashed roof is DRAM's only when its arrays are several times the
// last-level cache (64 MiB arrays read a 508 MiB L3, not DRAM): sized from
// the cache, said in the legend and kept in the cached method, so that peaks
// measured over other sizes are measured again.
TEST(SvodBenchRoofline, TheDramRoofStreamsFourTimesTheLastLevelCache) {
  test::TempDir dir;
  const fs::path plan = SVOD_SOURCE_DIR "/examples/mlp/plan.json";
  const ProcessResult r = bench_plot(plan, dir / "mlp.svg", dir / "cache", "48M");
  ASSERT_TRUE(r.ok()) << r.err;
  EXPECT_NE(r.out.find(" GB/s, DRAM "), std::string::npos) << r.out;
  const std::string method = nlohmann::json::parse(read_text(dir / "cache" / "machine.json"))["method"];
  EXPECT_NE(method.find("over 192 MiB (4x the 48 MiB last-level cache (SVOD_LLC_SIZE): DRAM)"), std::string::npos)
      << method;
  const std::string svg = unescape(read_text(dir / "mlp.svg"));
  EXPECT_NE(svg.find("4x the 48 MiB last-level cache (SVOD_LLC_SIZE): DRAM"), std::string::npos);
  EXPECT_NE(svg.find(">DRAM "), std::string::npos);

  // Another cache size is another way of measuring: measured again.
  ASSERT_TRUE(bench_plot(plan, dir / "again.svg", dir / "cache", "16M").ok());
  const std::string again = nlohmann::json::parse(read_text(dir / "cache" / "machine.json"))["method"];
  EXPECT_NE(again.find("over 192 MiB (12x the 16 MiB last-level cache (SVOD_LLC_SIZE): DRAM)"), std::string::npos)
      << again;
}

TEST(SvodBenchRoofline, ACacheTooLargeForFreeMemoryMakesACacheRoofAndSaysSo) {
  // Memory cannot hold twice a 1 TiB cache: the arrays stay small (no
  // gigabytes taken for a roof that would not be DRAM's anyway), and the
  // roof, its caption, the legend and the summary call it a cache roof.
  test::TempDir dir;
  const ProcessResult r = bench_plot(SVOD_SOURCE_DIR "/examples/mlp/plan.json", dir / "mlp.svg", dir / "cache", "1T");
  ASSERT_TRUE(r.ok()) << r.err;
  EXPECT_NE(r.out.find(" GB/s, last-level cache "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("DRAM"), std::string::npos) << r.out;
  const std::string svg = unescape(read_text(dir / "mlp.svg"));
  EXPECT_NE(svg.find("free memory cannot hold twice the 1024 GiB last-level cache (SVOD_LLC_SIZE): a cache roof, "
                     "not DRAM"),
            std::string::npos);
  EXPECT_NE(svg.find(">last-level cache "), std::string::npos);
}

TEST(SvodBenchRoofline, AMalformedCacheSizeIsRefusedByName) {
  test::TempDir dir;
  const ProcessResult r =
      bench_plot(SVOD_SOURCE_DIR "/examples/mlp/plan.json", dir / "mlp.svg", dir / "cache", "lots");
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.err.find("SVOD_LLC_SIZE=\"lots\": expected a size such as 32M"), std::string::npos) << r.err;
}

// A plan of one small kernel per (flops, bytes) pair, each declaring those
// counts and run as `count` ops, then a copy (which has neither).
nlohmann::json one_kernel_plan(int count, const std::vector<std::pair<double, double>>& flops_bytes) {
  nlohmann::json programs = nlohmann::json::object(), ops = nlohmann::json::array();
  for (size_t p = 0; p < flops_bytes.size(); ++p) {
    const std::string name = fmt::format("scale{}", p);
    programs[name] = {{"language", "c"},
                      {"source", fmt::format("void {}(float* restrict o, const float* restrict a) {{ for (int i = 0; "
                                             "i < 4096; i++) o[i] = 2.0f * a[i] + 1.0f; }}",
                                             name)},
                      {"entry", name},
                      {"buffers", {{{"name", "o"}, {"access", "write"}}, {{"name", "a"}}}},
                      {"flops", flops_bytes[p].first},
                      {"bytes", flops_bytes[p].second}};
    for (int i = 0; i < count; ++i) ops.push_back({{"run", name}, {"buffers", {"y", "x"}}});
  }
  ops.push_back({{"copy", {{"dst", "x"}, {"src", "y"}}}});
  return {{"svod_plan", 1},
          {"device", "CPU"},
          {"buffers",
           {{"x", {{"dtype", "f32"}, {"count", 4096}, {"init", {{"fill", 1}}}}},
            {"y", {{"dtype", "f32"}, {"count", 4096}}}}},
          {"programs", programs},
          {"ops", ops}};
}

TEST(SvodBenchRoofline, OpsAboveTheRoofsAreMarkedBesideTheirPointsAndOnStderr) {
  // Flop and byte counts far beyond what the kernel does, as a wrong count
  // in a plan gives: one op above the compute roof, one above the L1 cache
  // roof, whatever the peaks; and one honest op.
  test::TempDir dir;
  write_text(dir / "plan.json", one_kernel_plan(1, {{1e13, 1e9}, {1e9, 1e11}, {8192, 32768}}).dump());
  const ProcessResult r = bench_plot(dir / "plan.json", dir / "above.svg", dir / "cache");
  ASSERT_TRUE(r.ok()) << r.err;
  EXPECT_NE(r.err.find("svod bench: note: op 0 kernel scale0 reaches "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" times the compute roof ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("svod bench: note: op 1 kernel scale1 reaches "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" times the L1 cache roof ("), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("op 2 "), std::string::npos) << r.err;
  check_roofline(dir / "above.svg", {"op 3 copy x <- y — no flop/byte counts"});
  const Roofline picture = parse(read_text(dir / "above.svg"));
  ASSERT_EQ(picture.points.size(), 3u);
  EXPECT_EQ(picture.points[0].attrs.at("data-above"), "true");
  EXPECT_EQ(picture.points[1].attrs.at("data-above"), "true");
  // The table says it too.
  size_t notes = 0;
  for (const Text& t : picture.texts) notes += t.attrs.count("class") && t.attrs.at("class") == "note";
  EXPECT_EQ(notes, 2u);
}

TEST(SvodBenchRoofline, CachedPeaksAreMeasuredAgainWhenBeatenOrMeasuredTheOldWay) {
  test::TempDir dir;
  const fs::path plan = SVOD_SOURCE_DIR "/examples/mlp/plan.json";
  ASSERT_TRUE(bench_plot(plan, dir / "first.svg", dir / "cache").ok());
  const fs::path cached = dir / "cache" / "machine.json";
  auto doc = nlohmann::json::parse(read_text(cached));

  // Peaks the MLP beats, as a measurement on a busy machine gives: measured
  // again, the better figures kept.
  doc["gflops"] = 0.01;
  doc["cache_gbps"] = 0.001;
  doc["dram_gbps"] = 0.0005;
  write_text(cached, doc.dump());
  ProcessResult r = bench_plot(plan, dir / "beaten.svg", dir / "cache");
  ASSERT_TRUE(r.ok()) << r.err;
  auto after = nlohmann::json::parse(read_text(cached));
  EXPECT_GT(after["gflops"].get<double>(), 0.01);
  EXPECT_GT(after["cache_gbps"].get<double>(), 0.001);
  EXPECT_EQ(r.out.find("(peak 0.0 GFLOP/s"), std::string::npos) << r.out;

  // Peaks cached without a method (before issue 26) are not trusted, even
  // when they are higher than anything here.
  doc.erase("method");
  doc["gflops"] = 1e9;
  write_text(cached, doc.dump());
  r = bench_plot(plan, dir / "again.svg", dir / "cache");
  ASSERT_TRUE(r.ok()) << r.err;
  after = nlohmann::json::parse(read_text(cached));
  EXPECT_TRUE(after.contains("method"));
  EXPECT_LT(after["gflops"].get<double>(), 1e9);
}

TEST(SvodBenchRoofline, ManyOpsAtOnePlaceGetLabelsThatDoNotOverlap) {
  // Thirty ops of one kernel: thirty points in one cluster, whose numbers
  // must move out with leader lines; and a copy, listed as not plotted.
  test::TempDir dir;
  write_text(dir / "plan.json", one_kernel_plan(30, {{8192, 32768}}).dump());
  const ProcessResult r = bench_plot(dir / "plan.json", dir / "many.svg", dir / "cache");
  ASSERT_TRUE(r.ok()) << r.err;
  check_roofline(dir / "many.svg", {"op 30 copy x <- y — no flop/byte counts"});
  EXPECT_EQ(parse(read_text(dir / "many.svg")).points.size(), 30u);
}

// Op ids are any JSON string: markup characters and control characters
// (which XML cannot hold at all) still make a picture rsvg-convert renders.
TEST(SvodBenchRoofline, AnOpIdWithMarkupOrControlCharactersIsDrawnSafely) {
  test::TempDir dir;
  nlohmann::json plan = one_kernel_plan(1, {{8192, 32768}});
  plan["ops"][0]["id"] = "k\x01<b>&\x1f";
  write_text(dir / "plan.json", plan.dump());
  const ProcessResult r = bench_plot(dir / "plan.json", dir / "id.svg", dir / "cache");
  ASSERT_TRUE(r.ok()) << r.err;
  const std::string svg = read_text(dir / "id.svg");
  for (char c : svg)
    EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t' && c != '\r') << int(c);
  EXPECT_NE(svg.find("k\uFFFD&lt;b&gt;&amp;\uFFFD"), std::string::npos);
  check_roofline(dir / "id.svg", {"op 1 copy x <- y — no flop/byte counts"});
}

}  // namespace
}  // namespace svod
