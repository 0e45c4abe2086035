#include "protocol/frame.hpp"

#include <algorithm>
#include <boost/throw_exception.hpp>
#include <stdexcept>

#include "protocol/digest.hpp"

namespace mh::protocol {

namespace {

FrameRefusal invalid(std::string message) {
  return FrameRefusal{FrameRefusalKind::Invalid, "not a frame: " + std::move(message)};
}

// Reads a list of objects, each through `read_one`; any misfit makes the frame Invalid.
template <class T, class Fn>
bool read_objects(FieldReader& f, std::string_view k, std::vector<T>& out, Fn&& read_one) {
  const json::array* a = f.req_array(k);
  if (!a) return false;
  for (const auto& item : *a) {
    if (!item.is_object()) {
      f.fail("\"" + std::string(k) + "\" holds " + describe_json(item) + ", expected objects");
      return false;
    }
    FieldReader inner(item.get_object(), std::string(k));
    out.push_back(read_one(inner));
    if (!inner.ok()) {
      f.fail(inner.error());
      return false;
    }
  }
  return true;
}

std::optional<Operation> read_operation(FieldReader& f) {
  std::string op = f.req_string("op");
  if (!f.ok()) return std::nullopt;
  auto kind = parse_enum<OpKind>(op);
  if (!kind) {
    f.fail("unknown operation \"" + excerpt(op, 40) + "\"; the vocabulary is " + vocabulary<OpKind>());
    return std::nullopt;
  }
  Operation operation{*kind, {}, {}};
  if (*kind == OpKind::mcp_call) {
    operation.server = f.req_string("server");
    operation.tool = f.req_string("tool");
    if (!f.ok()) return std::nullopt;
  }
  return operation;
}

void normalise_operations(std::vector<Operation>& ops) {
  std::sort(ops.begin(), ops.end());
  ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
}

json::value operation_json(const Operation& op) {
  json::object o;
  o["op"] = op.wire_name();
  if (op.op == OpKind::mcp_call) {
    o["server"] = op.server;
    o["tool"] = op.tool;
  }
  return o;
}

json::value notes_json(const std::vector<FrameNote>& notes, std::string_view attribution_key) {
  json::array a;
  for (const auto& n : notes) {
    json::object o;
    o["text"] = n.text;
    if (n.attribution)
      o[attribution_key] = *n.attribution;
    else
      o[attribution_key] = nullptr;
    a.push_back(std::move(o));
  }
  return a;
}

// An operations array (the frame's own, or a subject rule's): objects only, each one an operation.
// `not_objects` begins the complaint about an element that is not an object.
void read_operations(FieldReader& f, const json::array& ops, std::string_view not_objects,
                     std::vector<Operation>& out) {
  for (const auto& op : ops) {
    if (!op.is_object()) {
      f.fail(std::string(not_objects) + describe_json(op) + ", expected objects");
      return;
    }
    FieldReader r(op.get_object(), "operations");
    auto parsed = read_operation(r);
    if (!parsed) {
      f.fail(r.error());
      return;
    }
    out.push_back(*parsed);
  }
}

}  // namespace

bool Frame::admits(const Operation& op) const {
  return std::binary_search(operations.begin(), operations.end(), op);
}

boost::system::result<Frame, FrameRefusal> frame_from_json(const json::value& v, bool require_sealed) {
  if (!v.is_object()) return FrameRefusal{FrameRefusalKind::NotJson, "not a JSON object: read " + describe_json(v)};
  const json::object& o = v.get_object();
  if (const json::value* format = o.if_contains("format")) {
    if (!format->is_string() || format->get_string() != kFrameFormat)
      return FrameRefusal{FrameRefusalKind::UnknownFormat, "unknown format tag " + describe_json(*format) +
                                                               ", expected \"" + std::string(kFrameFormat) + "\""};
  }

  Frame frame;
  FieldReader f(o, "");
  if (const json::object* w = f.req_object("workflow")) {
    FieldReader r(*w, "workflow");
    frame.workflow_id = r.req_string("id");
    frame.workflow_version = r.req_string("version");
    if (!r.ok()) f.fail(r.error());
  }
  if (const json::object* n = f.req_object("node")) {
    FieldReader r(*n, "node");
    frame.node_id = r.req_string("id");
    if (!r.ok()) f.fail(r.error());
  }
  if (const json::value* s = o.if_contains("step")) {
    std::string error;
    auto step = read_step_ref(*s, error);
    if (step)
      frame.step = *step;
    else
      f.fail(error);
  } else {
    f.fail("missing required field \"step\"");
  }
  read_objects(f, "prior", frame.prior, [](FieldReader& r) {
    return FrameNote{r.req_string("text"), r.opt_string("source")};
  });
  read_objects(f, "obligations", frame.obligations, [](FieldReader& r) {
    return FrameNote{r.req_string("text"), r.opt_string("asked_by")};
  });
  read_objects(f, "reaching", frame.reaching, [](FieldReader& r) {
    return FrameNote{r.req_string("text"), r.opt_string("asked_by")};
  });
  read_objects(f, "next", frame.next, [](FieldReader& r) { return r.req_string("id"); });
  if (const json::object* h = f.req_object("handoff")) {
    FieldReader r(*h, "handoff");
    std::string kind = r.req_string("handoff");
    if (kind == "none") {
      frame.handoff.kind = Handoff::Kind::none;
    } else if (kind == "artifact") {
      frame.handoff.kind = Handoff::Kind::artifact;
      frame.handoff.name = r.req_string("name");
      frame.handoff.kind_ = r.opt_string("kind");
    } else if (kind == "structured_answer") {
      frame.handoff.kind = Handoff::Kind::structured_answer;
      frame.handoff.schema = r.req_string("schema");
    } else if (r.ok()) {
      r.fail("\"handoff\" is \"" + excerpt(kind, 40) + "\", expected none, artifact or structured_answer");
    }
    if (!r.ok()) f.fail(r.error());
  }
  if (const json::object* subjects = f.opt_object("subjects")) {
    FieldReader r(*subjects, "subjects");
    read_objects(r, "rules", frame.subject_rules, [](FieldReader& rule) {
      SubjectRule out;
      out.subjects = rule.strings_or_empty("subjects");
      if (const json::array* ops = rule.req_array("operations"))
        read_operations(rule, *ops, "a rule's operations hold ", out.operations);
      normalise_operations(out.operations);
      return out;
    });
    if (!r.ok()) f.fail(r.error());
  }
  if (const json::array* ops = f.req_array("operations"))
    read_operations(f, *ops, "\"operations\" holds ", frame.operations);
  normalise_operations(frame.operations);
  if (const json::object* e = f.opt_object("entities")) {
    FieldReader r(*e, "entities");
    Entities entities;
    entities.source = r.req_string("source");
    const json::array* members = r.req_array("members");
    if (members) entities.members = r.strings_or_empty("members");
    if (r.ok())
      frame.entities = std::move(entities);
    else
      f.fail(r.error());
  }
  auto stated = f.opt_string("digest");
  if (!f.ok()) return invalid(f.error());

  frame.digest = stated.value_or("");
  if (require_sealed) {
    std::string computed = compute_frame_digest(frame);
    if (!stated)
      return FrameRefusal{FrameRefusalKind::DigestMismatch,
                          "the frame states no digest: it was never sealed (its canonical digest "
                          "would be " +
                              computed + ")"};
    if (*stated != computed)
      return FrameRefusal{FrameRefusalKind::DigestMismatch,
                          "the stated digest " + excerpt(*stated, 64) +
                              " does not describe the "
                              "contents (computed " +
                              computed + "): the frame was never sealed or was edited after sealing"};
  }
  return frame;
}

boost::system::result<Frame, FrameRefusal> load_frame(std::string_view document, bool require_sealed) {
  std::string error;
  auto v = parse_json(document, &error);
  if (!v) return FrameRefusal{FrameRefusalKind::NotJson, "not a JSON object: " + error};
  if (!v->is_object()) return FrameRefusal{FrameRefusalKind::NotJson, "not a JSON object: read " + describe_json(*v)};
  if (!v->get_object().contains("format"))
    return FrameRefusal{FrameRefusalKind::UnknownFormat,
                        "no format tag, expected \"" + std::string(kFrameFormat) + "\""};
  return frame_from_json(*v, require_sealed);
}

json::value frame_to_json(const Frame& frame, bool with_envelope) {
  json::object o;
  if (frame.entities) {
    json::array members;
    for (const auto& m : frame.entities->members)
      members.emplace_back(m);
    o["entities"] = json::object{{"members", std::move(members)}, {"source", frame.entities->source}};
  } else {
    o["entities"] = nullptr;
  }
  switch (frame.handoff.kind) {
    case Handoff::Kind::none:
      o["handoff"] = json::object{{"handoff", "none"}};
      break;
    case Handoff::Kind::artifact: {
      json::object h{{"handoff", "artifact"}, {"name", frame.handoff.name}};
      if (frame.handoff.kind_)
        h["kind"] = *frame.handoff.kind_;
      else
        h["kind"] = nullptr;
      o["handoff"] = std::move(h);
      break;
    }
    case Handoff::Kind::structured_answer:
      o["handoff"] = json::object{{"handoff", "structured_answer"}, {"schema", frame.handoff.schema}};
      break;
  }
  json::array next;
  for (const auto& id : frame.next)
    next.push_back(json::object{{"id", id}});
  o["next"] = std::move(next);
  o["node"] = json::object{{"id", frame.node_id}};
  o["obligations"] = notes_json(frame.obligations, "asked_by");
  json::array ops;
  for (const auto& op : frame.operations)
    ops.push_back(operation_json(op));
  o["operations"] = std::move(ops);
  o["prior"] = notes_json(frame.prior, "source");
  o["reaching"] = notes_json(frame.reaching, "asked_by");
  o["step"] = json::object{{"attempt", frame.step.attempt},
                           {"index", frame.step.index},
                           {"state", frame.step.state},
                           {"workflow", frame.step.workflow}};
  if (!frame.subject_rules.empty()) {
    json::array rules;
    for (const auto& rule : frame.subject_rules) {
      json::array rule_ops;
      for (const auto& op : rule.operations)
        rule_ops.push_back(operation_json(op));
      json::array subjects;
      for (const auto& s : rule.subjects)
        subjects.emplace_back(s);
      rules.push_back(json::object{{"operations", std::move(rule_ops)}, {"subjects", std::move(subjects)}});
    }
    o["subjects"] = json::object{{"rules", std::move(rules)}};
  }
  o["workflow"] = json::object{{"id", frame.workflow_id}, {"version", frame.workflow_version}};
  if (with_envelope) {
    o["format"] = kFrameFormat;
    o["digest"] = frame.digest;
  }
  return o;
}

std::string canonical_frame_bytes(const Frame& frame) {
  return canonical_json(frame_to_json(frame, /*with_envelope=*/false));
}

std::string compute_frame_digest(const Frame& frame) {
  return sha256_hex(canonical_frame_bytes(frame));
}

void seal(Frame& frame) {
  normalise_operations(frame.operations);
  frame.digest = compute_frame_digest(frame);
}

std::string frame_document(const Frame& frame) {
  return pretty_json(frame_to_json(frame, true));
}

std::string render_frame_text(const Frame& frame) {
  std::string out;
  auto line = [&](std::string_view s) {
    out.append(s);
    out.push_back('\n');
  };
  auto attributed = [&](const FrameNote& n) {
    std::string s = "- " + n.text;
    if (n.attribution) s += " (" + *n.attribution + ")";
    line(s);
  };
  line("Workflow " + frame.workflow_id + " (" + frame.workflow_version + "), state " + frame.node_id + ", step " +
       std::to_string(frame.step.index) + " attempt " + std::to_string(frame.step.attempt) + ".");
  out.push_back('\n');
  line("Already established:");
  if (frame.prior.empty()) line("- nothing yet.");
  for (const auto& n : frame.prior)
    attributed(n);
  out.push_back('\n');
  line("Must hold here:");
  if (frame.obligations.empty()) line("- nothing is required of this step beyond its handoff.");
  for (const auto& n : frame.obligations)
    attributed(n);
  if (!frame.reaching.empty()) {
    out.push_back('\n');
    line("Not yet satisfied on a way out:");
    for (const auto& n : frame.reaching)
      attributed(n);
  }
  if (!frame.next.empty()) {
    out.push_back('\n');
    std::string s = "Reachable from here: ";
    for (std::size_t i = 0; i < frame.next.size(); ++i)
      s += (i ? ", " : "") + frame.next[i];
    line(s + ".");
  }
  out.push_back('\n');
  switch (frame.handoff.kind) {
    case Handoff::Kind::none:
      line("This step owes: nothing.");
      break;
    case Handoff::Kind::artifact:
      line("This step owes: the artifact " + frame.handoff.name +
           (frame.handoff.kind_ ? " (kind " + *frame.handoff.kind_ + ")." : std::string(".")));
      break;
    case Handoff::Kind::structured_answer:
      line("This step owes: a structured answer against the schema " + frame.handoff.schema + ".");
      break;
  }
  if (frame.entities) {
    out.push_back('\n');
    line("Choose exactly one of these, enumerated from " + frame.entities->source + ":");
    for (const auto& m : frame.entities->members)
      line("- " + m);
  }
  out.push_back('\n');
  line("Strictly only these operations are admitted here:");
  if (frame.operations.empty()) line("- none. This step calls no tools.");
  for (const auto& op : frame.operations) {
    if (op.op == OpKind::mcp_call)
      line("- mcp.call " + op.server + "/" + op.tool);
    else
      line("- " + std::string(op.wire_name()));
  }
  out.push_back('\n');
  out.append("Frame " + frame.digest + ".");
  return out;
}

void throw_exception_from_error(const FrameRefusal& e, const boost::source_location& loc) {
  boost::throw_exception(std::runtime_error(e.message), loc);
}

}  // namespace mh::protocol
