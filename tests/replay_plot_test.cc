// tests/replay_plot_test.cc: the memory-over-time picture (tools/replay/plot.h).
// Each file is parsed by a strict XML reader written here (both formats must
// be well-formed XML: the HTML is polyglot XHTML), then its series, peaks,
// capture windows and legend are checked.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tools/replay/plot.h"
#include "tools/replay/replay.h"
#include "tools/replay/trace.h"

namespace {

// ---- a strict, small XML reader ------------------------------------------------

struct Element {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::string text;  // the text directly inside, entities decoded
  int depth = 0;
};

class XmlReader {
 public:
  explicit XmlReader(const std::string &doc) : s_(doc) {}

  // Parse the whole document; false with error() set when it is not
  // well-formed.
  bool Parse() {
    SkipSpace();
    if (Starts("<?xml")) {
      size_t end = s_.find("?>", pos_);
      if (end == std::string::npos) return Fail("unclosed XML declaration");
      pos_ = end + 2;
    }
    SkipMisc();
    if (Starts("<!DOCTYPE")) {
      size_t end = s_.find('>', pos_);
      if (end == std::string::npos) return Fail("unclosed DOCTYPE");
      pos_ = end + 1;
    }
    SkipMisc();
    if (!ParseElement(0)) return false;
    SkipMisc();
    if (pos_ != s_.size()) return Fail("content after the root element");
    return true;
  }

  const std::vector<Element> &elements() const { return elements_; }
  const std::string &error() const { return error_; }

  std::vector<const Element *> Find(const std::string &name, const std::string &attr = "",
                                    const std::string &value = "") const {
    std::vector<const Element *> found;
    for (const Element &e : elements_) {
      if (e.name != name) continue;
      if (!attr.empty()) {
        auto it = e.attrs.find(attr);
        if (it == e.attrs.end() || it->second != value) continue;
      }
      found.push_back(&e);
    }
    return found;
  }

 private:
  bool Fail(const std::string &why) {
    error_ = why + " at byte " + std::to_string(pos_);
    return false;
  }
  bool Starts(const char *p) const { return s_.compare(pos_, std::strlen(p), p) == 0; }
  void SkipSpace() {
    while (pos_ < s_.size() && std::strchr(" \t\r\n", s_[pos_]) != nullptr) pos_++;
  }
  void SkipMisc() {
    for (;;) {
      SkipSpace();
      if (!Starts("<!--")) return;
      size_t end = s_.find("-->", pos_);
      pos_ = end == std::string::npos ? s_.size() : end + 3;
    }
  }
  static bool NameChar(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ':' ||
           c == '.';
  }
  bool ReadName(std::string *out) {
    size_t start = pos_;
    while (pos_ < s_.size() && NameChar(s_[pos_])) pos_++;
    if (pos_ == start) return Fail("a name was expected");
    *out = s_.substr(start, pos_ - start);
    return true;
  }
  // Decode text up to `stop` (exclusive); every '&' must be an entity and no
  // '<' may appear.
  bool Decode(size_t stop, std::string *out) {
    while (pos_ < stop) {
      char c = s_[pos_];
      if (c == '<') return Fail("'<' in text or attribute");
      if (c != '&') {
        out->push_back(c);
        pos_++;
        continue;
      }
      size_t semi = s_.find(';', pos_);
      if (semi == std::string::npos || semi > stop) return Fail("'&' without entity");
      std::string entity = s_.substr(pos_ + 1, semi - pos_ - 1);
      static const std::map<std::string, char> named = {
          {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
      if (named.count(entity) != 0) {
        out->push_back(named.at(entity));
      } else if (entity.size() > 1 && entity[0] == '#' &&
                 entity.find_first_not_of("0123456789", 1) == std::string::npos) {
        out->push_back(static_cast<char>(std::atoi(entity.c_str() + 1)));
      } else {
        return Fail("unknown entity &" + entity + ";");
      }
      pos_ = semi + 1;
    }
    return true;
  }
  bool ParseElement(int depth) {
    if (depth > 64) return Fail("too deep");
    if (!Starts("<")) return Fail("'<' expected");
    pos_++;
    Element e;
    e.depth = depth;
    if (!ReadName(&e.name)) return false;
    for (;;) {
      SkipSpace();
      if (Starts("/>")) {
        pos_ += 2;
        elements_.push_back(e);
        return true;
      }
      if (Starts(">")) {
        pos_++;
        break;
      }
      std::string attr;
      if (!ReadName(&attr)) return false;
      if (e.attrs.count(attr) != 0) return Fail("attribute " + attr + " twice");
      if (!Starts("=")) return Fail("'=' expected after " + attr);
      pos_++;
      char quote = pos_ < s_.size() ? s_[pos_] : '\0';
      if (quote != '"' && quote != '\'') return Fail("quoted value expected for " + attr);
      size_t close = s_.find(quote, pos_ + 1);
      if (close == std::string::npos) return Fail("unclosed value of " + attr);
      pos_++;
      std::string value;
      if (!Decode(close, &value)) return false;
      pos_ = close + 1;
      e.attrs[attr] = value;
    }
    size_t index = elements_.size();
    elements_.push_back(e);
    for (;;) {
      size_t lt = s_.find('<', pos_);
      if (lt == std::string::npos) return Fail("unclosed <" + e.name + ">");
      std::string text;
      if (!Decode(lt, &text)) return false;
      elements_[index].text += text;
      if (Starts("<!--")) {
        SkipMisc();
        continue;
      }
      if (Starts("</")) {
        pos_ += 2;
        std::string name;
        if (!ReadName(&name)) return false;
        if (name != e.name) return Fail("</" + name + "> closes <" + e.name + ">");
        SkipSpace();
        if (!Starts(">")) return Fail("'>' expected");
        pos_++;
        return true;
      }
      if (!ParseElement(depth + 1)) return false;
    }
  }

  const std::string &s_;
  size_t pos_ = 0;
  std::vector<Element> elements_;
  std::string error_;
};

TEST(ReplayPlotXmlReaderTest, RefusesWhatIsNotWellFormed) {
  for (const char *bad : {"<a><b></a></b>", "<a x=1/>", "<a>&nope;</a>", "<a>1 < 2</a>",
                          "<a x=\"1\" x=\"2\"/>", "<a>", "<a/><b/>", "<a>x & y</a>"}) {
    std::string doc(bad);
    XmlReader r(doc);
    EXPECT_FALSE(r.Parse()) << bad;
  }
  std::string good = "<?xml version=\"1.0\"?>\n<a x='1 &amp; 2'><b/>t&lt;<!-- c --></a>\n";
  XmlReader r(good);
  ASSERT_TRUE(r.Parse()) << r.error();
  EXPECT_EQ("1 & 2", r.Find("a")[0]->attrs.at("x"));
  EXPECT_EQ("t<", r.Find("a")[0]->text);
}

// ---- plots ------------------------------------------------------------------------

std::string TempPath(const std::string &name) {
  const char *dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

struct Trace {
  replay_trace *trace = nullptr;
  ~Trace() { replay_trace_destroy(trace); }
};

void ReadTrace(const std::string &name, const std::string &content, Trace *out) {
  std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
  char err[512];
  ASSERT_EQ(GMR_OK, replay_trace_read(path.c_str(), nullptr, &out->trace, err, sizeof err)) << err;
}

// A result as a per-call-timed run leaves it: `passes` passes and the held
// bytes after each event (none: a stack without a footprint).
struct FakeResult {
  std::vector<replay_pass_result> passes;
  std::vector<size_t> held;
  replay_result result = {};
  FakeResult(size_t pass_count, std::vector<size_t> held_bytes)
      : passes(pass_count), held(std::move(held_bytes)) {
    result.pass_count = pass_count;
    result.passes = passes.data();
    result.held_bytes = held.empty() ? nullptr : held.data();
    result.held_count = held.size();
  }
};

std::string Plot(replay_plot_format format, const replay_trace *trace,
                 const std::vector<const char *> &names, const std::vector<FakeResult *> &fakes) {
  std::vector<replay_result> results;
  for (FakeResult *f : fakes) results.push_back(f->result);
  char *text = nullptr;
  size_t size = 0;
  FILE *out = open_memstream(&text, &size);
  char err[256];
  EXPECT_EQ(GMR_OK, replay_plot_write(out, format, trace, names.data(), results.data(),
                                      results.size(), err, sizeof err))
      << err;
  std::fclose(out);
  std::string doc(text, size);
  std::free(text);
  return doc;
}

const char kTrace[] =
    "action,addr,size,stream,time_us\n"
    "alloc,4096,1024,0,1\n"
    "alloc,8192,4096,0,2\n"
    "free_requested,4096,1024,0,3\n"
    "alloc,12288,2048,0,4\n"
    "free_requested,8192,4096,0,5\n"
    "free_requested,12288,2048,0,6\n";

TEST(ReplayPlotTest, OneSeriesPerStackThatReportsAFootprintAndOneForTheTrace) {
  Trace t;
  ReadTrace("plot.csv", kTrace, &t);
  FakeResult pool(1, {4096, 8192, 8192, 8192, 8192, 8192});
  FakeResult spec(1, {1024, 5120, 4096, 6144, 2048, 0});
  FakeResult silent(1, {});
  const std::vector<const char *> names = {"pool", "tracking > limiting(limit=\"8GiB\") > pool",
                                           "host"};
  for (replay_plot_format format : {REPLAY_PLOT_SVG, REPLAY_PLOT_HTML}) {
    std::string doc = Plot(format, t.trace, names, {&pool, &spec, &silent});
    XmlReader xml(doc);
    ASSERT_TRUE(xml.Parse()) << xml.error() << "\n" << doc;
    EXPECT_EQ(format == REPLAY_PLOT_SVG ? "svg" : "html", xml.elements()[0].name);
    if (format == REPLAY_PLOT_SVG) {
      EXPECT_EQ(0u, doc.find("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg "));
    } else {
      EXPECT_EQ(0u, doc.find("<!DOCTYPE html>\n<html "));
      EXPECT_EQ(1u, xml.Find("svg").size());
    }
    // Self-contained: no script, no link, nothing fetched.
    EXPECT_TRUE(xml.Find("script").empty());
    EXPECT_TRUE(xml.Find("link").empty());
    EXPECT_TRUE(xml.Find("image").empty());
    // The only addresses are XML namespace names, which nothing fetches.
    size_t addresses = 0, namespaces = 0;
    for (size_t at = doc.find("http"); at != std::string::npos; at = doc.find("http", at + 1)) {
      addresses++;
    }
    for (size_t at = doc.find("xmlns=\"http://www.w3.org/"); at != std::string::npos;
         at = doc.find("xmlns=\"http://www.w3.org/", at + 1)) {
      namespaces++;
    }
    EXPECT_EQ(namespaces, addresses);
    auto held = xml.Find("polyline", "class", "series held");
    ASSERT_EQ(2u, held.size()) << "one line per stack with a footprint";
    EXPECT_EQ(names[0], held[0]->attrs.at("data-stack"));
    EXPECT_EQ(names[1], held[1]->attrs.at("data-stack")) << "the spec, escaped and read back";
    auto live = xml.Find("polygon", "class", "series live");
    ASSERT_EQ(1u, live.size());
    // The peaks: both stacks and the trace, each where it first occurs.
    auto titles = xml.Find("title");
    std::vector<std::string> peaks;
    for (const Element *e : titles) {
      if (e->text.find(": peak ") != std::string::npos) peaks.push_back(e->text);
    }
    ASSERT_EQ(3u, peaks.size());
    EXPECT_EQ("pool: peak 8.0 KiB at event 1", peaks[0]);
    EXPECT_EQ(std::string(names[1]) + ": peak 6.0 KiB at event 3", peaks[1]);
    EXPECT_EQ("trace live bytes: peak 6.0 KiB at event 3", peaks[2]);
    // The legend names every stack, the one not drawn too.
    std::string legend;
    for (const Element *e : xml.Find("text")) legend += e->text + "\n";
    EXPECT_NE(std::string::npos, legend.find("pool: held from below, peak 8.0 KiB (1.333x live)"))
        << legend;
    EXPECT_NE(std::string::npos, legend.find("host: reports no footprint (not drawn)")) << legend;
    EXPECT_NE(std::string::npos, legend.find(" KiB")) << "axis ticks carry their unit";
  }
}

TEST(ReplayPlotTest, CaptureWindowsAndPassesAreMarked) {
  Trace t;
  ReadTrace("capture.csv",
            "action,addr,size,stream,time_us\n"
            "alloc,4096,1024,5,1\n"
            "capture_begin,0,0,5,2\n"
            "alloc,8192,2048,5,3\n"
            "free_requested,8192,2048,5,4\n"
            "capture_end,0,0,5,5\n"
            "free_requested,4096,1024,5,6\n",
            &t);
  FakeResult two_passes(2, std::vector<size_t>(12, 4096));
  std::string doc = Plot(REPLAY_PLOT_SVG, t.trace, {"pool"}, {&two_passes});
  XmlReader xml(doc);
  ASSERT_TRUE(xml.Parse()) << xml.error();
  auto captures = xml.Find("rect", "class", "capture");
  ASSERT_EQ(2u, captures.size()) << "one window per capture per pass";
  EXPECT_EQ(1u, xml.Find("line", "class", "pass").size()) << "one boundary between two passes";
  std::string titles;
  for (const Element *e : xml.Find("title")) titles += e->text + "\n";
  EXPECT_NE(std::string::npos, titles.find("CUDA graph capture, events 1 to 4")) << titles;
  EXPECT_NE(std::string::npos, titles.find("CUDA graph capture, events 7 to 10")) << titles;
}

// A long replay is reduced to each pixel column's minimum and maximum: the
// file stays small and a one-event spike survives.
TEST(ReplayPlotTest, LongReplaysKeepEveryPeak) {
  std::string csv = "action,addr,size,stream,time_us\n";
  const size_t pairs = 20000;
  for (size_t i = 0; i < pairs; ++i) {
    csv += "alloc," + std::to_string(4096 + i * 512) + ",512,0," + std::to_string(2 * i) + "\n";
    csv += "free_requested," + std::to_string(4096 + i * 512) + ",512,0," +
           std::to_string(2 * i + 1) + "\n";
  }
  Trace t;
  ReadTrace("long.csv", csv, &t);
  std::vector<size_t> held(2 * pairs, size_t{1} << 30);
  held[31337] = size_t{3} << 30;  // one event at 3 GiB
  FakeResult spike(1, held);
  std::string doc = Plot(REPLAY_PLOT_SVG, t.trace, {"spiky"}, {&spike});
  EXPECT_LT(doc.size(), 100000u);
  XmlReader xml(doc);
  ASSERT_TRUE(xml.Parse()) << xml.error();
  auto line = xml.Find("polyline", "class", "series held");
  ASSERT_EQ(1u, line.size());
  std::istringstream points(line[0]->attrs.at("points"));
  std::string point;
  double top_y = 1e9;
  size_t count = 0;
  while (points >> point) {
    top_y = std::min(top_y, std::atof(point.substr(point.find(',') + 1).c_str()));
    count++;
  }
  EXPECT_LT(count, 2000u);
  auto circles = xml.Find("circle");
  ASSERT_FALSE(circles.empty());
  EXPECT_DOUBLE_EQ(std::atof(circles[0]->attrs.at("cy").c_str()), top_y)
      << "the line reaches the marked peak";
  std::string titles;
  for (const Element *e : xml.Find("title")) titles += e->text + "\n";
  EXPECT_NE(std::string::npos, titles.find("spiky: peak 3072.0 MiB at event 31337")) << titles;
  std::string texts;
  for (const Element *e : xml.Find("text")) texts += e->text + "\n";
  EXPECT_NE(std::string::npos, texts.find("3 GiB")) << "a GiB axis for GiB values";
}

TEST(ReplayPlotTest, FormatsComeFromTheExtension) {
  EXPECT_EQ(REPLAY_PLOT_SVG, replay_plot_format_of_path("out.svg"));
  EXPECT_EQ(REPLAY_PLOT_SVG, replay_plot_format_of_path("/tmp/a.b/OUT.SVG"));
  EXPECT_EQ(REPLAY_PLOT_HTML, replay_plot_format_of_path("out.html"));
  EXPECT_EQ(REPLAY_PLOT_HTML, replay_plot_format_of_path("out.htm"));
  EXPECT_EQ(REPLAY_PLOT_UNKNOWN, replay_plot_format_of_path("out.png"));
  EXPECT_EQ(REPLAY_PLOT_UNKNOWN, replay_plot_format_of_path("out"));
  EXPECT_EQ(REPLAY_PLOT_UNKNOWN, replay_plot_format_of_path("dir.svg/out"));
  EXPECT_EQ(REPLAY_PLOT_UNKNOWN, replay_plot_format_of_path(nullptr));
}

TEST(ReplayPlotTest, AFailedWriteIsReported) {
  Trace t;
  ReadTrace("plot2.csv", kTrace, &t);
  FakeResult pool(1, {4096, 8192, 8192, 8192, 8192, 8192});
  const char *names[] = {"pool"};
  FILE *full = std::fopen("/dev/full", "w");
  ASSERT_NE(nullptr, full);
  char err[256];
  EXPECT_EQ(GMR_ERR_INTERNAL, replay_plot_write(full, REPLAY_PLOT_SVG, t.trace, names,
                                                &pool.result, 1, err, sizeof err));
  EXPECT_STREQ("writing the plot failed", err);
  std::fclose(full);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, replay_plot_write(stdout, REPLAY_PLOT_UNKNOWN, t.trace,
                                                        names, &pool.result, 1, err, sizeof err));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, replay_plot_write(nullptr, REPLAY_PLOT_SVG, t.trace, names,
                                                        &pool.result, 1, err, sizeof err));
}

}  // namespace
