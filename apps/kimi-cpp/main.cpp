// kimi-cpp: one binary, many subcommands (explicit table, no registration tricks).
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "args.h"
#include "commands.h"
#include "core/error.h"

namespace {

struct Command {
    const char* name;
    int (*fn)(int, char**);
    const char* help;
};

// clang-format off
const Command kCommands[] = {
    {"serve",         kimi::app::cmd_serve,         "OpenAI-compatible HTTP server (chat, completions, models, metrics)"},
    {"generate",      kimi::app::cmd_generate,      "one completion from a prompt (streams; --json for ids + timings)"},
    {"chat",          kimi::app::cmd_chat,          "interactive multi-turn chat with the chat template"},
    {"score",         kimi::app::cmd_score,         "run one sequence, write the logits of every position"},
    {"make-model",    kimi::app::cmd_make_model,    "write a random checkpoint in the HF layout (+ tokenizer)"},
    {"inspect",       kimi::app::cmd_inspect,       "print a model's config, layer map, sizes (--tensors: its tensor manifest)"},
    {"quantize",      kimi::app::cmd_quantize,      "write an MXFP4 (compressed-tensors) copy of a checkpoint"},
    {"tokenize",      kimi::app::cmd_tokenize,      "text → token ids"},
    {"detokenize",    kimi::app::cmd_detokenize,    "token ids → text"},
    {"chat-template", kimi::app::cmd_chat_template, "render a conversation (or a request) with the model's chat format"},
    {"chat-parse",    kimi::app::cmd_chat_parse,    "parse generated text into reasoning, content and tool calls"},
    {"eval",          kimi::app::cmd_eval,          "evaluations: eval gsm8k, eval compare A.jsonl B.jsonl (exact McNemar)"},
    {"bench",         kimi::app::cmd_bench,         "benchmarks: bench decode (A/B), serve (load), machine (limits), model (roofline), matmul (one product), vision, tokenizer"},
};
// clang-format on

// An error line: "kimi-cpp CMD: error: MESSAGE". Messages that already name the command (or a
// subcommand, "bench model: …") lose that prefix, which moves into the line's own.
void print_error(const char* command, const std::string& msg) {
    std::string where = command, text = msg;
    const size_t colon = msg.find(": ");
    if (colon != std::string::npos && msg.compare(0, where.size(), where) == 0 &&
        (colon == where.size() || (msg[where.size()] == ' ' && msg.find(' ', where.size() + 1) >= colon))) {
        where = msg.substr(0, colon);
        text = msg.substr(colon + 2);
    }
    std::fprintf(stderr, "kimi-cpp %s: error: %s\n", where.c_str(), text.c_str());
}

void usage(FILE* f) {
    std::fprintf(f, "usage: kimi-cpp <command> [flags]\n\ncommands:\n");
    for (const auto& c : kCommands) std::fprintf(f, "  %-14s %s\n", c.name, c.help);
}

}   // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!std::strcmp(argv[1], "help") || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    for (const auto& c : kCommands) {
        if (std::strcmp(argv[1], c.name) != 0) continue;
        try {
            return c.fn(argc - 2, argv + 2);
        } catch (const kimi::app::HelpShown& h) {
            std::fputs(h.text.c_str(), stdout);
            return 0;
        } catch (const kimi::Error& e) {
            if (const auto help = kimi::app::help_so_far()) {   // --help, and a check wanted real values
                std::fputs(help->c_str(), stdout);
                return 0;
            }
            print_error(c.name, e.what());
            return 1;
        } catch (const std::bad_alloc&) {
            print_error(c.name, "out of memory");
            return 1;
        } catch (const std::exception& e) {
            print_error(c.name, e.what());
            return 1;
        }
    }
    std::fprintf(stderr, "kimi-cpp: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
