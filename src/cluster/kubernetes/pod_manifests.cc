#include "cluster/kubernetes/pod_manifests.h"

#include <absl/strings/str_split.h>
#include <yaml-cpp/yaml.h>

#include <regex>

#include "common/strings.h"

namespace elasticdl::cluster {
namespace {

using nlohmann::json;

const char* RoleName(Role role) {
  switch (role) {
    case Role::kMaster:
      return "master";
    case Role::kPs:
      return "ps";
    case Role::kWorker:
      break;
  }
  return "worker";
}

json Labels(const std::string& job_name, const ProcessName& process) {
  return {{"app", "elasticdl"},
          {"elasticdl-job-name", job_name},
          {"elasticdl-replica-type", RoleName(process.role())},
          {"elasticdl-replica-index", std::to_string(process.index())}};
}

json Metadata(const proto::KubernetesSpec& spec, const std::string& job_name,
              const ProcessName& process, const json& owner) {
  json metadata = {{"name", PodName(job_name, process)},
                   {"namespace", spec.namespace_()},
                   {"labels", Labels(job_name, process)}};
  if (!owner.is_null()) metadata["ownerReferences"] = json::array({owner});
  return metadata;
}

json FieldEnv(const char* name, const char* field) {
  return {{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", field}}}}}};
}

json Resources(const proto::PodResources& resources) {
  json out = json::object();
  if (!resources.requests().empty()) {
    out["requests"] = std::map<std::string, std::string>(resources.requests().begin(),
                                                         resources.requests().end());
  }
  if (!resources.limits().empty()) {
    out["limits"] =
        std::map<std::string, std::string>(resources.limits().begin(), resources.limits().end());
  }
  return out;
}

const proto::PodResources& ResourcesOf(const proto::KubernetesSpec& spec, Role role) {
  switch (role) {
    case Role::kMaster:
      return spec.master_resources();
    case Role::kPs:
      return spec.ps_resources();
    case Role::kWorker:
      break;
  }
  return spec.worker_resources();
}

// Applies the overlay's `key` mapping (a JSON merge patch) to `object`.
StatusOr<json> Overlay(json object, const std::string& overlay_json, const char* key) {
  if (overlay_json.empty()) return object;
  json overlay = json::parse(overlay_json, nullptr, false);
  if (!overlay.is_object()) return absl::InvalidArgumentError("cluster spec overlay: not JSON");
  if (overlay.contains(key)) object.merge_patch(overlay[key]);
  return object;
}

// YAML -> JSON: scalars stay strings unless YAML would read them as
// numbers or booleans.
json ToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : node) out[kv.first.as<std::string>()] = ToJson(kv.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& item : node) out.push_back(ToJson(item));
      return out;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = node.Scalar();
      if (node.Tag() == "!") return s;  // quoted
      if (s == "true" || s == "false") return s == "true";
      static const std::regex kInt(R"(^-?[0-9]+$)");
      static const std::regex kFloat(R"(^-?[0-9]*\.[0-9]+([eE][-+]?[0-9]+)?$)");
      try {
        if (std::regex_match(s, kInt)) return std::stoll(s);
        if (std::regex_match(s, kFloat)) return std::stod(s);
      } catch (const std::out_of_range&) {
        return s;  // too large for a number: the server reads the text
      }
      return s;
    }
    default:
      return nullptr;
  }
}

// Whether a plain YAML scalar `s` would read back as something else than
// this string.
bool NeedsQuotes(const std::string& s) {
  static const std::regex kNumberLike(R"(^[-+.]?([0-9]|\.inf|\.nan).*$)", std::regex::icase);
  static const std::regex kReserved(R"(^(y|n|yes|no|on|off|true|false|null|~)$)",
                                    std::regex::icase);
  return s.empty() || std::regex_match(s, kNumberLike) || std::regex_match(s, kReserved);
}

void Emit(YAML::Emitter& out, const json& value) {
  if (value.is_object()) {
    out << YAML::BeginMap;
    for (const auto& [key, item] : value.items()) {
      out << YAML::Key << key << YAML::Value;
      Emit(out, item);
    }
    out << YAML::EndMap;
  } else if (value.is_array()) {
    out << YAML::BeginSeq;
    for (const json& item : value) Emit(out, item);
    out << YAML::EndSeq;
  } else if (value.is_string()) {
    const std::string s = value.get<std::string>();
    if (NeedsQuotes(s)) out << YAML::DoubleQuoted;
    out << s;
  } else if (value.is_boolean()) {
    out << value.get<bool>();
  } else if (value.is_number_integer()) {
    out << value.get<int64_t>();
  } else if (value.is_number()) {
    out << value.get<double>();
  } else {
    out << YAML::Null;
  }
}

}  // namespace

std::string PodName(const std::string& job_name, const ProcessName& process) {
  return StrCat("elasticdl-", job_name, "-", process.label());
}

std::string JobSelector(const std::string& job_name) {
  return StrCat("app=elasticdl,elasticdl-job-name=", job_name);
}

std::optional<ProcessName> ProcessOfLabels(const json& labels) {
  if (!labels.is_object()) return std::nullopt;
  auto label = [&labels](const char* key) -> std::string {
    auto it = labels.find(key);
    return it != labels.end() && it->is_string() ? it->get<std::string>() : "";
  };
  const std::string type = label("elasticdl-replica-type");
  const std::string index = label("elasticdl-replica-index");
  if (type == "master") return index == "0" ? std::optional(ProcessName::Master()) : std::nullopt;
  if (type != "ps" && type != "worker") return std::nullopt;
  return ProcessName::Parse(StrCat(type, "-", index));
}

json OwnerReference(const std::string& name, const std::string& uid) {
  return {{"apiVersion", "v1"},         {"kind", "Pod"},     {"name", name}, {"uid", uid},
          {"blockOwnerDeletion", true}, {"controller", true}};
}

StatusOr<json> PodManifest(const proto::KubernetesSpec& spec, const std::string& job_name,
                           const ProcessName& process, const std::vector<std::string>& args,
                           const json& owner) {
  const Role role = process.role();
  json env = json::array({FieldEnv("ELASTICDL_POD_NAME", "metadata.name"),
                          FieldEnv("ELASTICDL_POD_NAMESPACE", "metadata.namespace"),
                          FieldEnv("ELASTICDL_POD_IP", "status.podIP")});
  for (int i = 0; i < spec.env_names_size() && i < spec.env_values_size(); ++i) {
    env.push_back({{"name", spec.env_names(i)}, {"value", spec.env_values(i)}});
  }
  json container = {{"name", "elasticdl"},
                    {"image", spec.image()},
                    {"command", json::array({"elasticdl"})},
                    {"args", args},
                    {"env", env}};
  if (!spec.image_pull_policy().empty()) container["imagePullPolicy"] = spec.image_pull_policy();
  if (json resources = Resources(ResourcesOf(spec, role)); !resources.empty()) {
    container["resources"] = resources;
  }
  if (role == Role::kMaster) {
    container["ports"] = json::array({{{"name", "grpc"}, {"containerPort", kMasterPort}}});
  } else if (role == Role::kPs) {
    container["ports"] = json::array({{{"name", "grpc"}, {"containerPort", kPsPort}}});
  }
  json volumes = json::array();
  json mounts = json::array();
  for (int i = 0; i < spec.volumes_size(); ++i) {
    const proto::PodVolume& v = spec.volumes(i);
    const std::string name = StrCat("volume-", i);
    json volume = {{"name", name}};
    if (!v.claim_name().empty()) {
      volume["persistentVolumeClaim"] = {{"claimName", v.claim_name()}};
      if (v.read_only()) volume["persistentVolumeClaim"]["readOnly"] = true;
    } else {
      volume["hostPath"] = {{"path", v.host_path()}};
    }
    volumes.push_back(volume);
    json mount = {{"name", name}, {"mountPath", v.mount_path()}};
    if (v.read_only()) mount["readOnly"] = true;
    mounts.push_back(mount);
  }
  if (!mounts.empty()) container["volumeMounts"] = mounts;

  // The master relaunches lost processes itself.
  const std::string restart = role != Role::kMaster || spec.restart_policy().empty()
                                  ? std::string("Never")
                                  : spec.restart_policy();
  json pod_spec = {{"restartPolicy", restart}, {"containers", json::array({container})}};
  if (!volumes.empty()) pod_spec["volumes"] = volumes;
  if (role == Role::kWorker && !spec.worker_priority_class().empty()) {
    pod_spec["priorityClassName"] = spec.worker_priority_class();
  }
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", Metadata(spec, job_name, process, owner)},
              {"spec", pod_spec}};
  return Overlay(std::move(pod), spec.overlay_json(), "pod");
}

StatusOr<json> ServiceManifest(const proto::KubernetesSpec& spec, const std::string& job_name,
                               const ProcessName& process, int port, const json& owner) {
  json service = {
      {"apiVersion", "v1"},
      {"kind", "Service"},
      {"metadata", Metadata(spec, job_name, process, owner)},
      {"spec",
       {{"type", "ClusterIP"},
        {"selector", Labels(job_name, process)},
        {"ports", json::array({{{"name", "grpc"}, {"port", port}, {"targetPort", port}}})}}}};
  return Overlay(std::move(service), spec.overlay_json(), "service");
}

std::vector<std::string> MasterPodArgs(const std::string& job_dir) {
  return {"master", "--job_dir=" + job_dir, "--host=$(ELASTICDL_POD_IP)",
          StrCat("--port=", kMasterPort)};
}

StatusOr<std::string> MasterManifestsYaml(const proto::KubernetesSpec& spec,
                                          const std::string& job_name, const std::string& job_dir) {
  EDL_ASSIGN_OR_RETURN(
      json pod, PodManifest(spec, job_name, ProcessName::Master(), MasterPodArgs(job_dir), json()));
  EDL_ASSIGN_OR_RETURN(json service,
                       ServiceManifest(spec, job_name, ProcessName::Master(), kMasterPort, json()));
  return ManifestsYaml({service, pod});
}

StatusOr<std::string> ReadClusterSpecOverlay(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(StrCat("--cluster_spec=", path, ": ", e.what()));
  }
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(
        StrCat("--cluster_spec=", path,
               ": expected a mapping with `pod` and/or `service` (merge patches of every pod "
               "and service of the job)"));
  }
  json overlay = ToJson(root);
  for (const auto& [key, value] : overlay.items()) {
    if (key != "pod" && key != "service") {
      return absl::InvalidArgumentError(
          StrCat("--cluster_spec=", path, ": unknown key '", key, "' (expected pod, service)"));
    }
    if (!value.is_object()) {
      return absl::InvalidArgumentError(
          StrCat("--cluster_spec=", path, ": ", key, " must be a mapping"));
    }
  }
  return overlay.dump();
}

std::string ManifestsYaml(const std::vector<json>& objects) {
  std::string out;
  for (const json& object : objects) {
    YAML::Emitter emitter;
    Emit(emitter, object);
    out += StrCat("---\n", emitter.c_str(), "\n");
  }
  return out;
}

StatusOr<std::map<std::string, std::string>> ParseResources(const std::string& text,
                                                            const std::string& flag) {
  static const std::regex kQuantity(
      R"(^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|e[0-9]+)?$)");
  static const std::regex kName(
      R"(^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9]*[a-z0-9])?$)");
  std::map<std::string, std::string> out;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    std::string name(absl::StripAsciiWhitespace(kv.first));
    const std::string value(absl::StripAsciiWhitespace(kv.second));
    if (name == "gpu") name = "nvidia.com/gpu";
    if (!std::regex_match(name, kName) || !std::regex_match(value, kQuantity)) {
      return absl::InvalidArgumentError(
          StrCat(flag, "=", text, ": '", std::string(item),
                 "' is not NAME=QUANTITY (e.g. cpu=500m,memory=4096Mi,gpu=1)"));
    }
    out[name] = value;
  }
  return out;
}

StatusOr<std::vector<proto::PodVolume>> ParseVolumes(const std::string& text) {
  std::vector<proto::PodVolume> out;
  for (absl::string_view entry : absl::StrSplit(text, ';', absl::SkipWhitespace())) {
    proto::PodVolume volume;
    for (absl::string_view item : absl::StrSplit(entry, ',', absl::SkipWhitespace())) {
      std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
      const std::string key(absl::StripAsciiWhitespace(kv.first));
      const std::string value(absl::StripAsciiWhitespace(kv.second));
      if (key == "host_path") {
        volume.set_host_path(value);
      } else if (key == "claim_name") {
        volume.set_claim_name(value);
      } else if (key == "mount_path") {
        volume.set_mount_path(value);
      } else if (key == "read_only" && (value == "true" || value == "false")) {
        volume.set_read_only(value == "true");
      } else {
        return absl::InvalidArgumentError(
            StrCat("--volume=", text, ": '", std::string(item),
                   "': expected host_path=, claim_name=, mount_path= or read_only=true|false"));
      }
    }
    if (volume.host_path().empty() == volume.claim_name().empty() || volume.mount_path().empty() ||
        volume.mount_path().front() != '/') {
      return absl::InvalidArgumentError(
          StrCat("--volume=", text, ": '", std::string(entry),
                 "' needs one of host_path=/PATH or claim_name=NAME, and mount_path=/PATH"));
    }
    out.push_back(volume);
  }
  return out;
}

}  // namespace elasticdl::cluster
