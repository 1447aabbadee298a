// Placeholder until the tokenizer lands (replaced by the tokenizer work).
#include "commands.h"
#include "core/error.h"
namespace kimi::app {
int cmd_tokenize(int, char**) { throw Error("tokenize: tokenizer not built yet"); }
int cmd_detokenize(int, char**) { throw Error("detokenize: tokenizer not built yet"); }
int cmd_chat_template(int, char**) { throw Error("chat-template: tokenizer not built yet"); }
int cmd_bench_tokenizer(int, char**) { throw Error("bench tokenizer: tokenizer not built yet"); }
}  // namespace kimi::app
