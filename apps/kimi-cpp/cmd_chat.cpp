// `kimi-cpp chat`: an interactive multi-turn chat in the terminal. Each turn renders the
// whole conversation with the model's chat format (src/chat/: Kimi Linear or Kimi-K3;
// tokenizer: the model directory unless --tokenizer), streams the reply through the format's
// output parser — K3's thinking channel dimmed on a terminal, prefixed `[think] ` otherwise,
// the response as is — and keeps it in the history (with K3's reasoning, as the encoder
// expects). /reset forgets the conversation, /exit (or end of input) quits, Ctrl-C stops the
// current reply only. Works the same with a pipe as input: one user turn per line.
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "args.h"
#include "chat/chat_format.h"
#include "commands.h"
#include "core/error.h"
#include "engine_options.h"
#include "local_run.h"
#include "media_options.h"

namespace kimi::app {

namespace {
enum class Read { kLine, kEof, kInterrupted };

// One line from fd 0 (without the newline). Reads byte-wise so nothing after the line is
// consumed; polls in short slices so a Ctrl-C is seen even if it came just before the read.
Read read_line(std::string& line) {
    line.clear();
    for (;;) {
        if (take_interrupt()) return Read::kInterrupted;
        pollfd p{0, POLLIN, 0};
        const int ready = ::poll(&p, 1, 100);
        if (ready == 0 || (ready < 0 && errno == EINTR)) continue;
        char c;
        const ssize_t n = ready > 0 ? ::read(0, &c, 1) : -1;
        if (n == 1) {
            if (c == '\n') return Read::kLine;
            line.push_back(c);
        } else if (n == 0) {
            return line.empty() ? Read::kEof : Read::kLine;
        } else if (errno != EINTR) {
            return Read::kEof;
        }
    }
}

std::string trim(const std::string& s) {
    const size_t a = s.find_first_not_of(" \t\r");
    if (a == std::string::npos) return "";
    return s.substr(a, s.find_last_not_of(" \t\r") - a + 1);
}
}   // namespace

int cmd_chat(int argc, char** argv) {
    ArgParser args("chat", argc, argv);
    const std::string model_dir = args.required("--model");
    const std::string tok_dir = args.str("--tokenizer", model_dir);
    const auto system = args.opt("--system");
    const bool quiet = args.flag("--quiet");
    const bool stats = args.flag("--stats");
    const auto thinking_flag = args.opt("--thinking");
    const EngineOptions engine_opts = parse_engine_options(args);
    SamplingParams defaults;
    defaults.max_tokens = 1024;
    const SamplingParams base = parse_sampling_options(args, defaults);
    const MediaOptions media = parse_media_options(args);
    args.done();

    auto model = load_model_with_progress(model_dir, quiet, engine_opts.weight_memory, engine_opts.shard,
                                          engine_opts.check_weights);
    const tok::Tokenizer tok = *load_tokenizer_for(tok_dir, model->config(), true);
    const auto draft = load_draft_model(engine_opts, *model, model_dir, quiet);
    const EngineConfig ec = engine_opts.with_model_precision(*model, draft.get());
    Engine engine(*model, ec, &tok);
    std::optional<LocalImages> local_images;
    if (model->has_vision()) local_images.emplace(*model, model_dir, media, ec.precision, ec.threads, quiet);
    if (!engine.leads()) {   // another rank of a split model (mpirun): rank 0 reads the conversation
        engine.follow();
        return 0;
    }
    const bool tty = ::isatty(0) && ::isatty(1);
    if (!quiet) {
        std::fprintf(stderr, "%s\n", engine.sizing().describe().c_str());
        if (const std::string w = engine.sizing().length_warning(); !w.empty()) std::fprintf(stderr, "%s\n", w.c_str());
        if (tty)
            std::fprintf(stderr, "chat: /reset forgets the conversation, /exit quits, Ctrl-C stops a reply%s\n",
                         local_images ? ", /image PATH adds an image to your next message" : "");
    }
    install_interrupt_handler();

    const auto format = chat::chat_format_for(tok);
    chat::ChatRequest conv;
    conv.add_generation_prompt = true;
    if (thinking_flag) {
        if (*thinking_flag != "on" && *thinking_flag != "off") throw Error("chat: --thinking must be on or off");
        conv.thinking = *thinking_flag == "on";
    }
    auto reset = [&] {
        conv.messages = nlohmann::ordered_json::array();
        if (system) conv.messages.push_back({{"role", "system"}, {"content", *system}});
    };
    reset();
    SamplingParams params = base;
    // A reply ends at the end-of-turn tokens (<|im_end|> or <|end_of_msg|>, [EOS]) unless --ignore-eos.
    if (!base.ignore_eos)
        for (int32_t id : tok.stop_ids()) params.stop_token_ids.push_back(id);
    // the parser reads K3's markers: keep their text (other special tokens add none)
    for (const char* m : {"<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"})
        if (auto id = tok.special_id(m)) params.keep_special_ids.push_back(*id);

    std::string line;
    nlohmann::ordered_json pending = nlohmann::ordered_json::array();   // /image parts for the next message
    for (;;) {
        if (tty) {
            std::printf("> ");
            std::fflush(stdout);
        }
        const Read got = read_line(line);
        if (got == Read::kEof) break;
        if (got == Read::kInterrupted) {
            std::printf("\n");
            if (tty) std::fprintf(stderr, "(Ctrl-C stops a reply; /exit or Ctrl-D quits)\n");
            continue;
        }
        const std::string cmd = trim(line);
        if (cmd.empty()) continue;
        if (cmd == "/exit" || cmd == "/quit") break;
        if (cmd.rfind("/image", 0) == 0 && (cmd.size() == 6 || cmd[6] == ' ')) {   // an image for the next turn
            const std::string path = trim(cmd.substr(6));
            try {
                if (!local_images) throw Error(model->vision_unavailable_reason());
                if (path.empty()) throw Error("/image needs a file path");
                const image::PromptImage img = local_images->load(path);   // checked now, loaded again per turn
                pending.push_back({{"type", "image_url"},
                                   {"image_url", {{"url", "file://" + std::filesystem::absolute(path).string()}}}});
                std::printf("(image %dx%d, %lld tokens: it goes with your next message)\n", img.img.geom.width,
                            img.img.geom.height, (long long)img.img.geom.n_tokens);
            } catch (const Error& e) {
                std::printf("(%s)\n", e.what());
            }
            std::fflush(stdout);
            continue;
        }
        if (cmd == "/reset") {
            pending = nlohmann::ordered_json::array();
            reset();
            std::printf("(conversation reset)\n");
            std::fflush(stdout);
            continue;
        }
        if (pending.empty()) {
            conv.messages.push_back({{"role", "user"}, {"content", line}});
        } else {
            pending.push_back({{"type", "text"}, {"text", line}});
            conv.messages.push_back({{"role", "user"}, {"content", std::move(pending)}});
            pending = nlohmann::ordered_json::array();
        }
        std::vector<image::PromptImage> images;
        if (local_images) conv.images = local_images->loader().resolver(images);
        tok::ChatPrompt prompt;
        std::vector<MediaSpan> spans;
        try {
            prompt = format->render(conv);
            if (local_images) spans = local_images->encode(prompt.ids, images);
        } catch (const Error& e) {
            conv.messages.erase(conv.messages.end() - 1);
            std::printf("(%s)\n", e.what());
            std::fflush(stdout);
            continue;
        }
        const int64_t room = int64_t(engine.max_model_len()) - int64_t(prompt.ids.size());
        if (room < 1) {
            conv.messages.erase(conv.messages.end() - 1);
            std::printf("(the conversation is %zu tokens, over max-model-len %d: /reset to start over)\n",
                        prompt.ids.size(), engine.max_model_len());
            std::fflush(stdout);
            continue;
        }
        params.max_tokens = int32_t(std::min<int64_t>(base.max_tokens, room));
        auto parser = format->new_parser(conv.thinking);
        std::vector<chat::Delta> deltas;
        bool in_think = false;
        auto show = [&] {
            for (const chat::Delta& d : deltas) {
                if (d.kind == chat::Delta::kToolCall) continue;
                const bool think = d.kind == chat::Delta::kReasoning;
                if (think != in_think)
                    std::fputs(think ? (tty ? "\x1b[2m" : "[think] ") : (tty ? "\x1b[0m" : "\n"), stdout);
                in_think = think;
                std::fwrite(d.text.data(), 1, d.text.size(), stdout);
            }
            deltas.clear();
            std::fflush(stdout);
        };
        const LocalResult r = run_local(
            engine, prompt.ids, params,
            [&](const TokenEvent& e) {
                parser->push(e.text, deltas);
                show();
            },
            quiet, false, false, spans);
        parser->finish(deltas);
        show();
        if (in_think && tty) std::fputs("\x1b[0m", stdout);
        std::printf(r.interrupted ? " [stopped]\n" : "\n");
        std::fflush(stdout);
        if (stats) std::fprintf(stderr, "[%s]\n", timing_line(r).c_str());
        const chat::AssistantMessage& reply = parser->message();
        nlohmann::ordered_json msg = {{"role", "assistant"}, {"content", reply.content.value_or("")}};
        if (reply.reasoning_content) msg["reasoning_content"] = *reply.reasoning_content;
        conv.messages.push_back(std::move(msg));
    }
    return 0;
}

}   // namespace kimi::app
