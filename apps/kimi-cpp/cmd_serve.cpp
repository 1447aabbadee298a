// `kimi-cpp serve`: the OpenAI-compatible server. Listens first (/health is 503 while the
// model loads), loads the model and tokenizer, starts the engine loop, prints the URL and a
// curl example, and serves until SIGINT/SIGTERM: then it stops accepting, lets in-flight
// requests finish for --shutdown-grace seconds, aborts the rest and exits 0. An engine that
// fails for good (a lost MPI rank) ends it with exit code 1.
#include <malloc.h>
#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <mutex>
#include <thread>

#include "args.h"
#include "media_options.h"
#include "chat/chat_format.h"
#include "commands.h"
#include "core/error.h"
#include "core/human_bytes.h"
#include "engine_options.h"
#include "runtime/step_traffic.h"
#include "server/http_server.h"

namespace kimi::app {
namespace {

// The engine line, every 10 s while there is work (vLLM's periodic stats): requests running and
// waiting, prompt and generation throughput over the interval, cache in use, prefix-cache hits.
class EngineLog {
public:
    explicit EngineLog(const EngineSnapshot& s) : last_(s), t_last_(std::chrono::steady_clock::now()) {}
    // Called often; the engine is asked for its figures only when a line is due.
    void tick(const Engine& engine) {
        const auto now = std::chrono::steady_clock::now();
        const double dt = std::chrono::duration<double>(now - t_last_).count();
        if (dt < 10.0) return;
        const EngineSnapshot s = engine.snapshot();
        const int64_t prompt = s.prompt_tokens_computed - last_.prompt_tokens_computed,
                      gen = s.generated_tokens - last_.generated_tokens;
        const int64_t queries = s.prefix_queries - last_.prefix_queries, hits = s.prefix_hits - last_.prefix_hits;
        if (prompt > 0 || gen > 0 || s.n_running > 0 || s.n_waiting > 0)
            std::fprintf(stderr,
                         "engine: %d running, %d waiting; prompt %.1f tok/s, generation %.1f tok/s; cache %.1f %% "
                         "used; prefix-cache hits %.1f %%\n",
                         s.n_running, s.n_waiting, double(prompt) / dt, double(gen) / dt,
                         s.blocks_total ? 100.0 * s.blocks_used / s.blocks_total : 0.0,
                         queries ? 100.0 * double(hits) / double(queries) : 0.0);
        last_ = s;
        t_last_ = now;
    }

private:
    EngineSnapshot last_;
    std::chrono::steady_clock::time_point t_last_;
};

// A key without the whitespace around it (spaces, tabs, a file's \r\n).
std::string trim_key(std::string_view k) {
    const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; };
    while (!k.empty() && space(k.front())) k.remove_prefix(1);
    while (!k.empty() && space(k.back())) k.remove_suffix(1);
    return std::string(k);
}

}   // namespace

int cmd_serve(int argc, char** argv) {
    const auto t_start = std::chrono::steady_clock::now();   // time to ready counts from here
    ArgParser args("serve", argc, argv);
    // The model: `serve MODEL` (as vLLM takes it) or `serve --model MODEL`; the positional word is
    // what is left once every flag took its value (below, before done()).
    const std::optional<std::string> model_flag = args.opt("--model", "the model directory (or MODEL)");
    const std::optional<std::string> tok_flag =
        args.opt("--tokenizer", "the tokenizer directory (default: the model's)");
    // vLLM's form: one or more names (`--served-model-name A B`); the first is the one replies
    // carry, every one is accepted in a request's `model` (an agent's ANTHROPIC_MODEL=claude-…)
    const std::vector<std::string> names =
        args.values("--served-model-name",
                    "the names clients may use, the first in replies (default: the model directory's last component)");
    server::ServerConfig sc;
    sc.host = args.str("--host", "127.0.0.1", "address to bind (0.0.0.0: every interface)");
    const int64_t port = args.integer("--port", 8000, 0, 65535, "port to listen on (0: any free port)");
    sc.port = int(port);
    // The API key: --api-key, else the file --api-key-file names, else $KIMI_API_KEY; none: no auth.
    // Surrounding whitespace is never part of a key (a client's header loses it). A key given
    // but empty is never "no auth": --api-key "$KEY" with KEY unset falls back to $KIMI_API_KEY
    // (as vLLM does) and is refused without it.
    const std::optional<std::string> key_flag = args.opt("--api-key", "the key clients must send (else $KIMI_API_KEY)");
    const std::optional<std::string> key_file =
        args.opt("--api-key-file", "a file holding the key (its first line), kept out of the process list");
    if (key_flag && key_file) throw Error("serve: give --api-key or --api-key-file, not both");
    const char* env_value = std::getenv("KIMI_API_KEY");
    const std::string env_key = trim_key(env_value ? env_value : "");
    if (key_flag) {
        sc.api_key = trim_key(*key_flag);
        if (sc.api_key.empty() && env_key.empty())
            throw Error(
                "serve: --api-key is empty (an unset variable?) and $KIMI_API_KEY is not set: give the key, "
                "or leave --api-key out to serve without one");
        if (sc.api_key.empty()) {
            std::fprintf(stderr, "serve: --api-key is empty: using $KIMI_API_KEY\n");
            sc.api_key = env_key;
        }
    } else if (key_file) {
        std::ifstream f(*key_file);
        std::string line;
        if (!f || !std::getline(f, line)) throw Error("serve: cannot read the API key from " + *key_file);
        sc.api_key = trim_key(line);
        if (sc.api_key.empty()) throw Error("serve: the API key file " + *key_file + " holds an empty first line");
    } else {
        sc.api_key = env_key;
    }
    // the default names the model by its directory's last component: no response shows a path
    const int64_t body_mb = args.integer("--max-body-mb", 16, 1, 4096);
    sc.max_body_bytes = size_t(body_mb) << 20;
    const int64_t max_seqs = args.integer("--max-sequences-per-request", 64, 1, 65536);
    sc.max_sequences_per_request = int32_t(max_seqs);
    sc.max_request_tokens = args.integer("--max-request-tokens", int64_t(1) << 20, 1, INT64_MAX);
    const int64_t max_conn = args.integer("--max-connections", 256, 1, 65536);
    sc.max_connections = int(max_conn);
    sc.request_timeout_s =
        args.real("--request-timeout", 30.0, 0, 86400, true, "seconds a request's head and body may take");
    sc.keep_alive_timeout_s =
        args.real("--keep-alive-timeout", 5.0, 0, 86400, true, "seconds an idle connection stays open");
    sc.shutdown_grace_s =
        args.real("--shutdown-grace", 5.0, 0, 3600, false, "seconds in-flight requests get at shutdown");
    // --allowed-origins: a comma-separated list, or vLLM's JSON list ('["*"]').
    for (std::string list = args.str("--allowed-origins", "", "CORS: origins browsers may call from (\"*\": any)");
         !list.empty();) {
        const size_t comma = list.find(',');
        std::string o = list.substr(0, comma);
        list = comma == std::string::npos ? "" : list.substr(comma + 1);
        const auto strip = [](std::string& x, const char* chars) {
            x.erase(0, x.find_first_not_of(chars));
            x.erase(x.find_last_not_of(chars) + 1);
        };
        strip(o, " []\"'");
        if (!o.empty()) sc.allowed_origins.push_back(o);
    }
    const std::string gen_config = args.choice("--generation-config", "auto", {"auto", "none"},
                                               "auto: sampling defaults from the model's generation_config.json");
    const std::string level = args.choice("--log-level", "info", {"debug", "info", "warning", "error"},
                                          "info: a line per request and an engine line every 10 s of activity");
    sc.log_level = level == "debug" ? 0 : level == "info" ? 1 : level == "warning" ? 2 : 3;
    sc.access_log = !args.flag("--no-access-log", "no line per request (5xx causes are still logged)");
    sc.responses_store_size = args.integer("--responses-store-size", 1000, 0, 1000000,
                                           "/v1/responses kept for previous_response_id (0: none)");
    sc.responses_store_ttl_s =
        args.real("--responses-store-ttl", 3600.0, 0, 30 * 86400.0, true, "seconds a stored response is kept");
    const MediaOptions media = parse_media_options(args);
    const double mm_gib = args.real("--mm-memory", 4.0);
    if (!(mm_gib > 0.0) || mm_gib > 1 << 20) throw Error("--mm-memory must be a size in GiB > 0");
    sc.image_memory_bytes = int64_t(mm_gib * 1024.0 * 1024.0 * 1024.0);
    if (media.limits.request_bytes > sc.image_memory_bytes)
        throw Error("--mm-request-memory must not be more than --mm-memory (the images of all requests in flight)");
    const bool quiet = args.flag("--quiet");
    const EngineOptions eo = parse_engine_options(args);
    const std::vector<std::string> pos = args.positionals("MODEL", "the model directory (or --model)");
    args.done();
    if (pos.size() > 1) throw Error("serve: one model, got " + std::to_string(pos.size()) + " positional arguments");
    if (!pos.empty() && model_flag) throw Error("serve: give the model once, as MODEL or as --model");
    if (pos.empty() && !model_flag)
        throw Error("serve: no model: kimi-cpp serve MODEL_DIR (see kimi-cpp serve --help)");
    const std::string model_dir = pos.empty() ? *model_flag : pos[0];
    const std::string tok_dir = tok_flag.value_or(model_dir);
    if (gen_config == "auto") sc.sampling_defaults = server::read_generation_config(model_dir);
    sc.served_model_name =
        names.empty() ? std::filesystem::path(model_dir).lexically_normal().filename().string() : names[0];
    if (names.size() > 1) sc.served_model_aliases.assign(names.begin() + 1, names.end());
    if (sc.served_model_name.empty())
        sc.served_model_name = std::filesystem::path(model_dir).lexically_normal().parent_path().filename().string();
    if (sc.served_model_name.empty()) sc.served_model_name = "kimi";
    if (eo.shard.split() && eo.shard.rank != 0) {
        // Another rank of a split model (mpirun): no HTTP, just rank 0's forward steps until its
        // engine stops; a signal is for rank 0, which then stops this one.
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
        auto model = load_model_with_progress(model_dir, true, eo.weight_memory, eo.shard, eo.check_weights);
        Engine engine(*model, eo.with_model_precision(*model));
        engine.follow();
        return 0;
    }

#ifdef __GLIBC__
    // Blocks of 4 MiB and more are mapped and unmapped on their own. glibc otherwise raises this
    // threshold to the largest block freed so far, and a large request's buffers (a 16 MiB
    // prompt, a big body) then stay behind in the heap of the HTTP thread that served it.
    mallopt(M_MMAP_THRESHOLD, 4 << 20);
#endif
    // Signals go to the thread below only (every thread started later inherits the mask).
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
    signal(SIGPIPE, SIG_IGN);
    std::mutex mu;
    std::condition_variable cv;
    bool stop = false, ready = false;
    std::thread watcher([&] {
        int sig = 0;
        sigwait(&sigs, &sig);
        std::unique_lock<std::mutex> lk(mu);
        if (!ready) {
            std::fprintf(stderr, "\nserve: interrupted while loading\n");
            std::_Exit(130);
        }
        stop = true;
        cv.notify_all();
    });
    watcher.detach();

    server::HttpServer http(sc);
    http.start();
    const std::string url =
        "http://" + (sc.host == "0.0.0.0" ? std::string("127.0.0.1") : sc.host) + ":" + std::to_string(http.port());
    std::fprintf(stderr, "serve: listening on %s (loading %s)\n", url.c_str(), model_dir.c_str());

    // For tests of the loading state (/health 503, a signal while loading): loading waits while
    // the file KIMI_LOAD_GATE names exists.
    if (const char* gate = std::getenv("KIMI_LOAD_GATE"))
        while (std::filesystem::exists(gate)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const auto t_load = std::chrono::steady_clock::now();
    auto model = load_model_with_progress(model_dir, quiet, eo.weight_memory, eo.shard, eo.check_weights, true);
    const auto t_loaded = std::chrono::steady_clock::now();
    const tok::Tokenizer tok = *load_tokenizer_for(tok_dir, model->config(), true);
    const auto draft = load_draft_model(eo, *model, model_dir, quiet);
    const EngineConfig ec = eo.with_model_precision(*model, draft.get());
    Engine engine(*model, ec, &tok);
    std::fprintf(stderr, "serve: %s\n", engine.sizing().describe().c_str());
    if (const std::string w = engine.sizing().length_warning(); !w.empty())
        std::fprintf(stderr, "serve: %s\n", w.c_str());
    if (ec.speculative.enabled()) {
        const int32_t n = Speculator::n_slots(ec);
        const CacheSizing& z = engine.sizing();
        const std::string draft_part = z.draft_slot_bytes > 0
            ? ", and as many of the draft model's: " + human_bytes(int64_t(n) * z.draft_slot_bytes)
            : "";
        std::fprintf(stderr,
                     "serve: speculative decoding: %s; %d state slots x %.1f KiB = %.1f MiB for its rollback%s\n",
                     ec.speculative.describe().c_str(), n, double(z.slot_bytes) / 1024.0,
                     double(n) * double(z.slot_bytes) / 1048576.0, draft_part.c_str());
    }
    if (const std::string d = sc.sampling_defaults.describe(); !d.empty())
        std::fprintf(stderr,
                     "serve: sampling defaults from generation_config.json: %s (--generation-config none: off)\n",
                     d.c_str());
    std::fprintf(stderr, "serve: chat format %s (stops at %s)\n", chat::chat_format_for(tok)->name(),
                 tok.special_id("<|end_of_msg|>") ? "<|end_of_msg|>" : "<|im_end|>");
    // Images (K3 with its tower): encoded on the request's thread, beside the engine's steps.
    const auto loader = make_media_loader(*model, model_dir, media);
    const auto encoder = make_vision_encoder(*model, ec.precision, ec.threads, media);
    if (encoder)
        std::fprintf(stderr, "serve: images on (vision tower %lld blocks; up to %d per prompt, %lld patches each)\n",
                     (long long)model->config().vision.n_layers, media.limits.images_per_prompt,
                     (long long)loader->media_config().in_patch_limit);
    else if (model->config().is_k3_layout())
        std::fprintf(stderr, "serve: images off: %s\n", model->vision_unavailable_reason().c_str());
    http.set_media(loader.get(), encoder.get());
    engine.start();
    http.metrics().set_weight_bytes(int64_t(held_weight_bytes(*model)));
    http.set_ready(&engine, &tok, &model->config());
    {
        std::lock_guard<std::mutex> lk(mu);
        ready = true;
    }
    const auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
    const auto t_ready = std::chrono::steady_clock::now();
    std::fprintf(stderr, "serve: ready in %.2f s (weights %.2f s, engine start with its profile run %.2f s)\n",
                 secs(t_start, t_ready), secs(t_load, t_loaded), secs(t_loaded, t_ready));
    // The hint works as pasted: with a key, the shell expands $KIMI_API_KEY inside double quotes
    // (and the line says to export it when the key did not come from there).
    const bool key_in_env = !sc.api_key.empty() && sc.api_key == env_key;
    std::printf(
        "kimi.cpp %s serving '%s' at %s  (Ctrl-C to stop)\n\n%s"
        "  curl %s/v1/chat/completions -H 'Content-Type: application/json'%s \\\n"
        "    -d '{\"model\": \"%s\", \"messages\": [{\"role\": \"user\", \"content\": \"Hello!\"}], \"max_tokens\": "
        "32}'\n\n",
        server::kVersion, sc.served_model_name.c_str(), url.c_str(),
        sc.api_key.empty() || key_in_env ? "" : "  export KIMI_API_KEY=...   # the key this server was given\n",
        url.c_str(), sc.api_key.empty() ? "" : " -H \"Authorization: Bearer $KIMI_API_KEY\"",
        sc.served_model_name.c_str());
    std::fflush(stdout);

    // Until a signal, or until the engine fails for good (a lost MPI rank): its requests were
    // answered 503 and /health says unhealthy; the server then stops with exit code 1.
    std::string failure;
    EngineLog engine_log(engine.snapshot());
    std::unique_lock<std::mutex> lk(mu);
    while (!cv.wait_for(lk, std::chrono::milliseconds(200), [&] { return stop; })) {
        if (!(failure = engine.failure()).empty()) break;
        if (sc.log_level <= 1) engine_log.tick(engine);
    }
    lk.unlock();
    if (!failure.empty()) {
        std::fprintf(stderr, "serve: the engine failed: %s\nserve: shutting down with exit code 1\n", failure.c_str());
        http.shutdown();
        return 1;
    }
    std::fprintf(stderr, "serve: shutting down (in-flight requests get %.0f s to finish)\n", sc.shutdown_grace_s);
    http.shutdown();
    engine.stop();
    std::fprintf(stderr, "serve: stopped\n");
    return 0;
}

}   // namespace kimi::app
