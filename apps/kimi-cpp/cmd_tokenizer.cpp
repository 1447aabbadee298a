// Tokenizer subcommands: `tokenize`, `detokenize`, `chat-template` and `bench tokenizer`.
// They are thin wrappers over kimi::tok::Tokenizer (src/tokenizer/tokenizer.h); the bench can
// also run the same corpus through npm `tiktoken` (WASM build of tiktoken's Rust core) in the
// same run, with Kimi's pat_str and specials, and checks that both produce the same tokens.
#include <sys/wait.h>
#include <unistd.h>

#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "args.h"
#include "checkpoint/gguf_file.h"
#include "engine_options.h"
#include "commands.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "text_io.h"
#include "tokenizer/unicode.h"

namespace kimi::app {
namespace {

tok::Pattern parse_pattern(ArgParser& args) {
    return args.choice("--pattern", "kimi", {"kimi", "o200k"}) == "kimi" ? tok::Pattern::kimi : tok::Pattern::o200k;
}

bool parse_special(ArgParser& args) { return args.choice("--special", "all", {"all", "none"}) == "all"; }

void append_ids(std::string& out, const std::vector<int32_t>& ids) {
    out += '[';
    for (size_t i = 0; i < ids.size(); ++i) {
        if (i) out += ',';
        out += std::to_string(ids[i]);
    }
    out += ']';
}

// A lossy JSON string (the JSON writer needs valid UTF-8).
std::string json_text(const std::string& bytes) {
    std::string valid;
    tok::utf8_append_lossy(valid, bytes);
    return nlohmann::json(valid).dump();
}

uint64_t fnv1a(const std::vector<int32_t>& ids) {
    uint64_t h = 1469598103934665603ull;
    for (int32_t id : ids) {
        h ^= uint32_t(id);
        h *= 1099511628211ull;
    }
    return h;
}

std::string exe_dir() {
    char buf[4096];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return ".";
    return std::filesystem::path(std::string(buf, size_t(n))).parent_path().string();
}

// Where `npm install --prefix <build>/npm-oracle tiktoken` (tests/tokenizer/setup_oracle.sh) put it.
std::string find_node_modules(const std::optional<std::string>& given) {
    std::vector<std::string> candidates;
    if (given) candidates.push_back(*given);
    if (const char* env = std::getenv("KIMI_NPM_ORACLE")) candidates.push_back(std::string(env) + "/node_modules");
    candidates.push_back(exe_dir() + "/../npm-oracle/node_modules");
    for (const auto& c : candidates)
        if (std::filesystem::exists(std::filesystem::path(c) / "tiktoken" / "package.json"))
            return std::filesystem::absolute(c).lexically_normal().string();
    throw Error("npm tiktoken not found (looked in " + candidates.front() +
                (candidates.size() > 1 ? " and " + std::to_string(candidates.size() - 1) + " more" : "") +
                "); run tests/tokenizer/setup_oracle.sh or pass --node-modules DIR");
}

// The npm side of `bench tokenizer --compare-tiktoken`: Kimi's TikTokenTokenizer around the
// WASM tiktoken core (windows, same-class runs, specials at n_base.., pat_str from argv).
const char* const kNodeBench = R"JS(
const [nm, dir, input, seconds, special, pat] = process.argv.slice(2);
const fs = require('fs'), path = require('path');
const { Tiktoken } = require(path.resolve(nm, 'tiktoken'));
const bpe = fs.readFileSync(path.join(dir, 'tiktoken.model'), 'utf8');
const nBase = bpe.split('\n').filter((l) => l.length > 0).length;
const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'));
const dec = cfg.added_tokens_decoder || {};
const specials = {};
for (let id = nBase; id < nBase + 258; ++id) specials[dec[id] ? dec[id].content : `<|reserved_token_${id}|>`] = id;
const enc = new Tiktoken(bpe, specials, pat);
const isspace = (c) => (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x20) || c === 0x85 || c === 0xa0 || c === 0x1680 ||
  (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000;
function pieces(text) {
  const cps = Array.from(text), out = [];
  for (let w = 0; w < cps.length; w += 400000) {
    const s = cps.slice(w, w + 400000);
    let len = 0, cur = s.length ? isspace(s[0].codePointAt(0)) : false, start = 0;
    for (let i = 0; i < s.length; ++i) {
      const sp = isspace(s[i].codePointAt(0));
      if (sp !== cur) { len = 1; cur = sp; } else if (++len > 25000) { out.push(s.slice(start, i).join('')); start = i; len = 1; }
    }
    out.push(s.slice(start).join(''));
  }
  return out;
}
const text = fs.readFileSync(input, 'utf8');
const bytes = Buffer.byteLength(text, 'utf8');
let iters = 0, tokens = 0, hash = 1469598103934665603n, first = true;
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };   // CPU seconds
const t0 = cpu();
let elapsed = 0;
do {
  for (const p of pieces(text)) {
    const ids = special === 'all' ? enc.encode(p, 'all') : enc.encode_ordinary(p);
    if (first) for (const id of ids) { hash ^= BigInt(id); hash = (hash * 1099511628211n) & 0xffffffffffffffffn; }
    tokens += ids.length;
  }
  first = false;
  ++iters;
  elapsed = cpu() - t0;
} while (elapsed < Number(seconds));
console.log(JSON.stringify({ seconds: elapsed, iterations: iters, bytes, tokens_per_iter: tokens / iters, hash: hash.toString() }));
)JS";

}   // namespace

int cmd_tokenize(int argc, char** argv) {
    ArgParser args("tokenize", argc, argv);
    const std::string dir = args.required("--tokenizer");
    const auto jsonl = args.opt("--input-jsonl");
    const auto text = args.opt("--text");
    const bool special = parse_special(args);
    const tok::Pattern pattern = parse_pattern(args);
    args.done();
    if (bool(jsonl) == bool(text)) throw Error("tokenize: give exactly one of --input-jsonl FILE or --text TEXT");
    const tok::Tokenizer t = is_gguf_path(dir) ? load_tokenizer_at(dir) : tok::Tokenizer::load(dir, {pattern});
    std::string out;
    if (text) {
        append_ids(out, t.encode(*text, special));
        out += '\n';
        write_out(out);
        return 0;
    }
    std::ifstream in(*jsonl, std::ios::binary);
    if (!in) throw Error("cannot open " + *jsonl);
    std::string line;
    size_t line_no = 0;
    std::vector<int32_t> ids;
    while (std::getline(in, line)) {
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) continue;
        std::string s;
        try {
            const auto j = nlohmann::json::parse(line);
            if (!j.is_string()) throw Error("not a JSON string");
            s = j.get<std::string>();
        } catch (const nlohmann::json::exception& e) {
            throw Error(*jsonl + ":" + std::to_string(line_no) + ": " + e.what());
        } catch (const Error& e) {
            throw Error(*jsonl + ":" + std::to_string(line_no) + ": " + e.what());
        }
        ids.clear();
        t.encode_append(s, special, ids);
        append_ids(out, ids);
        out += '\n';
        if (out.size() > (1u << 20)) {
            write_out(out);
            out.clear();
        }
    }
    write_out(out);
    return 0;
}

int cmd_detokenize(int argc, char** argv) {
    ArgParser args("detokenize", argc, argv);
    const std::string dir = args.required("--tokenizer");
    const std::string list = args.required("--tokens");
    const bool json = args.flag("--json");
    args.done();
    const tok::Tokenizer t = load_tokenizer_at(dir);
    const std::vector<int32_t> ids =
        list.empty() ? std::vector<int32_t>{} : parse_int_list("detokenize --tokens", list);
    const std::string bytes = t.decode(ids);
    write_out(json ? json_text(bytes) + "\n" : bytes + "\n");
    return 0;
}

int cmd_bench_tokenizer(int argc, char** argv) {
    ArgParser args("bench tokenizer", argc, argv);
    const std::string dir = args.required("--tokenizer");
    const std::string input = args.required("--input");
    const bool compare = args.flag("--compare-tiktoken");
    const bool special = parse_special(args);
    const double min_seconds = args.real("--seconds", 2.0);
    const auto node_modules = args.opt("--node-modules");
    const tok::Pattern pattern = parse_pattern(args);
    args.done();
    const std::string text = read_all(input);
    if (!tok::utf8_valid(text)) throw Error(input + ": not valid UTF-8");

    using clock = std::chrono::steady_clock;
    const auto l0 = clock::now();
    const tok::Tokenizer t = is_gguf_path(dir) ? load_tokenizer_at(dir) : tok::Tokenizer::load(dir, {pattern});
    const double load_s = std::chrono::duration<double>(clock::now() - l0).count();

    std::vector<int32_t> ids = t.encode(text, special);   // warm-up, and the reference output
    const uint64_t hash = fnv1a(ids);
    // CPU time of this (single-threaded) process, so a busy machine does not skew the numbers.
    auto cpu_now = [] {
        timespec ts{};
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
    };
    size_t iters = 0;
    const double t0 = cpu_now();
    double secs = 0;
    do {
        ids.clear();
        t.encode_append(text, special, ids);
        ++iters;
        secs = cpu_now() - t0;
    } while (secs < min_seconds);
    const double mb = double(text.size()) * double(iters) / 1e6;

    nlohmann::ordered_json r;
    r["input"] = input;
    r["bytes"] = text.size();
    r["tokens"] = ids.size();
    r["special"] = special ? "all" : "none";
    r["load_seconds"] = load_s;
    r["kimi_cpp"] = {{"threads", 1},
                     {"iterations", iters},
                     {"cpu_seconds", secs},
                     {"mb_per_s", mb / secs},
                     {"tokens_per_s", double(ids.size()) * double(iters) / secs}};
    if (compare) {
        const std::string nm = find_node_modules(node_modules);
        const auto script =
            std::filesystem::temp_directory_path() / ("kimi-bench-" + std::to_string(getpid()) + ".cjs");
        {
            std::ofstream f(script);
            f << kNodeBench;
            if (!f) throw Error("cannot write " + script.string());
        }
        auto quote = [](const std::string& s) {
            std::string q = "'";
            for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
            return q + "'";
        };
        const std::string cmd = "node " + quote(script.string()) + " " + quote(nm) + " " + quote(dir) + " " +
            quote(input) + " " + quote(std::to_string(min_seconds)) + " " + quote(special ? "all" : "none") + " " +
            quote(tok::pattern_regex(pattern));
        std::string output;
        FILE* p = popen(cmd.c_str(), "r");
        if (!p) throw Error("cannot run node");
        char buf[4096];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) output.append(buf, n);
        const int status = pclose(p);
        const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : status;
        std::filesystem::remove(script);
        if (rc != 0) throw Error("node tiktoken bench failed (exit " + std::to_string(rc) + "): " + output);
        nlohmann::json js;
        try {
            js = nlohmann::json::parse(output);
        } catch (const nlohmann::json::exception& e) {
            throw Error(std::string("node tiktoken bench: bad output: ") + e.what());
        }
        const double js_secs = js["seconds"].get<double>();
        const double js_iters = js["iterations"].get<double>();
        const double js_mb = double(text.size()) * js_iters / 1e6 / js_secs;
        const double js_tokens = js["tokens_per_iter"].get<double>();
        r["tiktoken_npm"] = {{"threads", 1},
                             {"iterations", js_iters},
                             {"cpu_seconds", js_secs},
                             {"mb_per_s", js_mb},
                             {"tokens_per_s", js_tokens * js_iters / js_secs}};
        r["identical_tokens"] =
            js["hash"].get<std::string>() == std::to_string(hash) && js_tokens == double(ids.size());
        r["speedup"] = (mb / secs) / js_mb;
    }
    write_out(r.dump(2) + "\n");
    if (compare && !r["identical_tokens"].get<bool>())
        throw Error("bench tokenizer: kimi-cpp and npm tiktoken disagree on " + input);
    return 0;
}

}   // namespace kimi::app
