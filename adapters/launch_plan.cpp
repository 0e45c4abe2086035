#include "adapters/launch_plan.hpp"

#include "protocol/json.hpp"

namespace mh::adapters {

json::value plan_to_json(const LaunchPlan& plan, const RunSpec& spec) {
  json::object o;
  o["adapter"] = plan.adapter;
  o["program"] = plan.program.string();
  json::array args;
  for (const auto& a : plan.args)
    args.emplace_back(a);
  o["args"] = std::move(args);
  json::array env;
  for (const auto& [k, v] : plan.env) {
    // Credentials never leave the process in a printable plan, nor does anything the submitter
    // declared: a vendor_env value may be a secret whatever its name.
    bool secret =
        k.find("TOKEN") != std::string::npos || k.find("KEY") != std::string::npos || spec.vendor_env.contains(k);
    env.emplace_back(k + "=" + (secret ? std::string(kRedacted) : v));
  }
  o["env"] = std::move(env);
  o["cwd"] = plan.cwd.string();
  json::array dirs;
  for (const auto& d : plan.directories)
    dirs.emplace_back(d.string());
  o["directories"] = std::move(dirs);
  json::array files;
  for (const auto& f : plan.files)
    files.push_back(json::object{{"path", f.path.string()}, {"bytes", f.contents.size()}, {"mode", f.mode}});
  o["files"] = std::move(files);
  if (!plan.links.empty()) {
    json::array links;
    for (const auto& l : plan.links)
      links.push_back(json::object{{"path", l.path.string()}, {"target", l.target.string()}});
    o["links"] = std::move(links);
  }
  o["transcript"] = plan.transcript_path.string();
  o["stdin_log"] = plan.stdin_log_path.string();
  o["run_marker"] = plan.run_marker.first + "=" + plan.run_marker.second;
  if (plan.hook_channel)
    o["hook_channel"] = json::object{{"env", plan.hook_channel->env_var}, {"address", plan.hook_channel->address}};
  else
    o["hook_channel"] = nullptr;
  std::string attestation;
  proto::JsonWriter w(attestation);
  proto::write(w, plan.attestation);
  o["hermetic"] = proto::parse_json(attestation).value_or(nullptr);
  json::array notes;
  for (const auto& n : plan.notes)
    notes.emplace_back(n);
  o["notes"] = std::move(notes);
  return o;
}

}  // namespace mh::adapters
