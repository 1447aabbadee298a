// Parsing and module matching of compressed-tensors quantization configs (see quant_config.h).
// ref: compressed-tensors utils/match.py (match_name, _match_class), vLLM compressed_tensors.py.
#include "checkpoint/quant_config.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"

namespace kimi {

namespace {
using json = nlohmann::json;

// Class names a linear layer of these models answers to (torch.nn.Linear and its module path).
// Every module the engine reads as a linear counts (the router too): the file decides its form.
bool is_linear_class(const std::string& t) { return t == "Linear" || t == "torch.nn.Linear" || t == "nn.Linear"; }

// A 're:' pattern std::regex may compile and search safely: at most 1024 characters and 32
// nested groups (its compiler recurses per group), and no quantified group that holds a
// quantifier itself ("(.*)*": backtracking exponential in the module name's length). Module
// patterns never need either. Empty: fine; else why not.
std::string unsafe_pattern(const std::string& p) {
    if (p.size() > 1024) return "longer than 1024 characters";
    std::vector<bool> quantified_inside;   // one per open group
    bool escaped = false, in_class = false;
    for (size_t i = 0; i < p.size(); ++i) {
        const char c = p[i];
        if (escaped) {
            escaped = false;
            continue;
        }
        if (c == '\\') {
            escaped = true;
        } else if (in_class) {
            in_class = c != ']';
        } else if (c == '[') {
            in_class = true;
        } else if (c == '(') {
            quantified_inside.push_back(false);
            if (quantified_inside.size() > 32) return "groups nested deeper than 32 levels";
        } else if (c == ')' && !quantified_inside.empty()) {
            const bool inner = quantified_inside.back();
            quantified_inside.pop_back();
            const char next = i + 1 < p.size() ? p[i + 1] : '\0';
            if (inner && (next == '*' || next == '+' || next == '{'))
                return "a repeated group holds a repetition itself (exponential matching)";
            if (!quantified_inside.empty()) quantified_inside.back() = quantified_inside.back() || inner;
        } else if ((c == '*' || c == '+' || c == '?' || c == '{') && !quantified_inside.empty()) {
            quantified_inside.back() = true;
        }
    }
    return "";
}

ModuleMatcher make_matcher(const json& v, const std::string& where) {
    if (!v.is_string()) throw Error(where + ": entries must be strings");
    ModuleMatcher m;
    m.text = v.get<std::string>();
    if (m.text.rfind("re:", 0) == 0) {
        if (const std::string why = unsafe_pattern(m.text.substr(3)); !why.empty())
            throw Error(where + ": regular expression '" + m.text.substr(0, 80) + (m.text.size() > 80 ? "…" : "") +
                        "' refused: " + why);
        try {
            m.re = std::make_shared<const std::regex>(m.text.substr(3), std::regex::ECMAScript);
        } catch (const std::regex_error& e) {
            throw Error(where + ": invalid regular expression '" + m.text + "': " + e.what());
        }
    } else {
        m.is_class = is_linear_class(m.text);
    }
    return m;
}

std::vector<ModuleMatcher> matchers(const json& obj, const char* key, const std::string& where) {
    std::vector<ModuleMatcher> out;
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return out;
    if (!it->is_array()) throw Error(where + key + ": must be a list of module names or 're:' patterns");
    for (const auto& v : *it) out.push_back(make_matcher(v, where + key));
    return out;
}

std::string text_of(const json& j) { return j.is_string() ? j.get<std::string>() : j.dump(); }

void need(bool ok, const std::string& what) {
    if (!ok) throw Error(what);
}
}   // namespace

bool ModuleMatcher::matches(const std::string& module) const {
    if (re) return std::regex_search(module, *re, std::regex_constants::match_continuous);
    return is_class || module == text;
}

bool QuantConfig::quantizes(const std::string& module) const { return why_not(module).empty(); }

std::string QuantConfig::why_not(const std::string& module) const {
    if (!mxfp4) return "it has no quantization_config";
    bool hit = false;
    for (const auto& t : targets) hit = hit || t.matches(module);
    if (!hit) return "none of the targets of " + where + " matches it";
    for (const auto& i : ignore)
        if (i.matches(module)) return where + " ignores it (entry '" + i.text + "')";
    return "";
}

nlohmann::ordered_json published_k3_quant_config() {
    // the published block, key order as published
    return nlohmann::ordered_json::parse(R"({"quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized",
  "quantization_status": "compressed",
  "config_groups": {"group_0": {"format": "mxfp4-pack-quantized", "targets": ["Linear"], "input_activations": null,
    "output_activations": null, "weights": {"num_bits": 4, "type": "float", "strategy": "group", "group_size": 32,
    "symmetric": true, "dynamic": false, "scale_dtype": "torch.uint8"}}},
  "ignore": ["re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*", "re:.*lm_head.*",
    "re:.*vision_tower.*", "re:.*mm_projector.*"]})");
}

QuantConfig parse_quant_config(const json& q, const std::string& where) {
    const std::string at = where + "quantization_config";
    if (!q.is_object()) throw Error(at + ": must be an object");
    const std::string method = q.contains("quant_method") ? text_of(q["quant_method"]) : "?";
    need(
        method == "compressed-tensors",
        at + ": quant_method '" + method + "' is not supported (only compressed-tensors mxfp4-pack-quantized weights)");
    const std::string top_format =
        q.contains("format") && q["format"].is_string() ? q["format"].get<std::string>() : "";
    if (auto kv = q.find("kv_cache_scheme"); kv != q.end() && !kv->is_null())
        throw Error(at + ".kv_cache_scheme: KV-cache quantization is not supported");
    auto groups = q.find("config_groups");
    need(groups != q.end() && groups->is_object() && !groups->empty(),
         at + ".config_groups: missing (expected at least one group)");
    QuantConfig c;
    c.mxfp4 = true;
    c.where = at;
    for (auto g = groups->begin(); g != groups->end(); ++g) {
        const std::string gw = at + ".config_groups." + g.key();
        need(g->is_object(), gw + ": must be an object");
        const std::string format =
            g->contains("format") && (*g)["format"].is_string() ? (*g)["format"].get<std::string>() : top_format;
        need(format == "mxfp4-pack-quantized",
             gw + ": format '" + (format.empty() ? std::string("?") : format) +
                 "' is not supported (only mxfp4-pack-quantized: FP4 E2M1 weights with E8M0 group scales)");
        for (const char* act : {"input_activations", "output_activations"})
            if (auto a = g->find(act); a != g->end() && !a->is_null())
                throw Error(gw + "." + act + ": activation quantization is not supported (weights-only MXFP4)");
        auto w = g->find("weights");
        need(w != g->end() && w->is_object(), gw + ".weights: missing");
        auto field = [&](const char* k) { return w->contains(k) ? text_of((*w)[k]) : std::string("?"); };
        need(field("num_bits") == "4", gw + ".weights.num_bits: " + field("num_bits") + " (MXFP4 has 4)");
        need(field("type") == "float", gw + ".weights.type: " + field("type") + " (MXFP4 is 'float')");
        need(field("strategy") == "group", gw + ".weights.strategy: " + field("strategy") + " (MXFP4 is 'group')");
        need(field("group_size") == "32",
             gw + ".weights.group_size: " + field("group_size") + " (MXFP4 groups are 32)");
        auto t = matchers(*g, "targets", gw + ".");
        need(!t.empty(), gw + ".targets: missing or empty");
        for (auto& m : t) c.targets.push_back(std::move(m));
    }
    c.ignore = matchers(q, "ignore", at + ".");
    return c;
}

}   // namespace kimi
