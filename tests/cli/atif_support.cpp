#include "tests/cli/atif_support.hpp"

#include <unistd.h>

#include <fstream>

#include "protocol/reader.hpp"

namespace mh::test {

HandStream& HandStream::add(const std::string& fields) {
  lines_.push_back(R"({"format":"metaharness.event/1","seq":)" + std::to_string(lines_.size() + 1) + R"(,"run":")" +
                   run_ + R"(",)" + fields + "}");
  return *this;
}

HandStream& HandStream::session_started(const std::string& adapter, const std::string& extra_fields) {
  return add(R"("event":"session.started","adapter":")" + adapter +
             R"(","adapter_class":"harness","harness_version":"9.9.9","session_id":"sess-1","model":"model-a",)"
             R"("withheld":null,"transcript":{"path":null,"digest":null,"bytes":null},)"
             R"("hermetic":{"mode":"on","decisions":"ask","imposed":[],"unavailable":[],"ambient_inputs":[],)"
             R"("installed_plugins":[]})" +
             (extra_fields.empty() ? "" : "," + extra_fields));
}

HandStream& HandStream::session_ended(const std::string& fields) {
  return add(R"("event":"session.ended","is_error":false,"subtype":"success",)"
             R"("census":{"allowed":0,"denied":0,"replaced":0,"abstained":0,"by_seam":{},"by_decider":{}})" +
             (fields.empty() ? "" : "," + fields));
}

HandStream& HandStream::stream_closed(const std::string& reason) {
  return add(R"("event":"stream.closed","events":)" + std::to_string(lines_.size()) + R"(,"reason":")" + reason +
             R"(","run_id":")" + run_ + R"(","process":{"kind":"exited","code":0})");
}

std::vector<protocol::Event> HandStream::events() const {
  std::vector<protocol::Event> out;
  for (const auto& line : lines_) {
    auto e = protocol::read_event_line(line);
    if (!e) {
      ADD_FAILURE() << "a hand-made line does not read: " << e.error().message << "\n" << line;
      continue;
    }
    out.push_back(std::move(*e));
  }
  return out;
}

namespace {

bool imports_jsonschema(const std::string& python) {
  if (::access(python.c_str(), X_OK) != 0) return false;
  CliProcess p({python, "-c", "import jsonschema"});
  p.close_stdin();
  return p.finish(60s) == 0;
}

}  // namespace

std::string python_with_jsonschema() {
  static const std::string found = [] {
    if (imports_jsonschema("/usr/bin/python3")) return std::string("/usr/bin/python3");
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "";
    std::size_t start = 0;
    while (start <= dirs.size()) {
      std::size_t end = dirs.find(':', start);
      if (end == std::string::npos) end = dirs.size();
      std::string candidate = dirs.substr(start, end - start) + "/python3";
      if (end > start && imports_jsonschema(candidate)) return candidate;
      start = end + 1;
    }
    return std::string();
  }();
  return found;
}

Validation validate_files(const std::vector<std::string>& files) {
  Validation v;
  std::string python = python_with_jsonschema();
  if (python.empty()) {
    v.status = 2;
    v.output = "no python3 with the jsonschema module (Debian's python3-jsonschema; ./run setup installs it)";
    return v;
  }
  std::vector<std::string> argv = {python, (source_dir() / "tests/cli/atif_validate.py").string(),
                                   (source_dir() / "docs/atif/atif-v1.8.schema.json").string()};
  argv.insert(argv.end(), files.begin(), files.end());
  auto run = run_to_end(std::move(argv), std::nullopt, 60s);
  v.status = run.status;
  v.output = run.out + run.err;
  return v;
}

Validation validate_atif(const std::vector<json::value>& docs, const std::filesystem::path& dir) {
  std::vector<std::string> files;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    auto file = dir / ("doc-" + std::to_string(i) + ".json");
    std::ofstream(file) << protocol::pretty_json(docs[i], false);
    files.push_back(file.string());
  }
  return validate_files(files);
}

Validation validate_atif_file(const std::filesystem::path& file) {
  return validate_files({file.string()});
}

namespace {

void collect(const json::value& v, std::multiset<std::uint64_t>& out) {
  if (v.is_array()) {
    for (const auto& e : v.as_array())
      collect(e, out);
    return;
  }
  if (!v.is_object()) return;
  for (const auto& kv : v.as_object()) {
    if (kv.key() == "seq" && kv.value().is_number()) out.insert(kv.value().to_number<std::uint64_t>());
    if (kv.key() == "seqs" && kv.value().is_array())
      for (const auto& s : kv.value().as_array())
        out.insert(s.to_number<std::uint64_t>());
    collect(kv.value(), out);
  }
}

}  // namespace

std::multiset<std::uint64_t> seqs_in(const json::value& doc) {
  std::multiset<std::uint64_t> out;
  collect(doc, out);
  return out;
}

}  // namespace mh::test
