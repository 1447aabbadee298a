// `kimi-cpp bench <what>`: dispatch to the benchmark subcommands.
#include <cstdio>
#include <cstring>

#include "commands.h"
#include "core/error.h"

namespace kimi::app {

int cmd_bench(int argc, char** argv) {
    static const char* usage =
        "usage: kimi-cpp bench decode|serve|machine|model|matmul|vision|tokenizer [flags]\n"
        "(kimi-cpp bench WHAT --help: the flags of one)\n";
    if (argc >= 1 && (!std::strcmp(argv[0], "--help") || !std::strcmp(argv[0], "-h"))) {
        std::fputs(usage, stdout);
        return 0;
    }
    if (argc < 1) throw Error(usage);
    if (!std::strcmp(argv[0], "tokenizer")) return cmd_bench_tokenizer(argc - 1, argv + 1);
    if (!std::strcmp(argv[0], "decode")) return cmd_bench_decode(argc - 1, argv + 1);
    if (!std::strcmp(argv[0], "serve")) return cmd_bench_serve(argc - 1, argv + 1);
    if (!std::strcmp(argv[0], "machine")) return cmd_bench_machine(argc - 1, argv + 1);
    if (!std::strcmp(argv[0], "model")) return cmd_bench_model(argc - 1, argv + 1);
    if (!std::strcmp(argv[0], "vision")) return cmd_bench_vision(argc - 1, argv + 1);
    if (!std::strcmp(argv[0], "matmul")) return cmd_bench_matmul(argc - 1, argv + 1);
    throw Error(std::string("unknown benchmark '") + argv[0] +
                "' (available: decode, serve, machine, model, matmul, vision, tokenizer)");
}

}   // namespace kimi::app
