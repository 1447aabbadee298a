// The subcommands of kimi-cpp. Each takes the words after its name and returns an exit code;
// a kimi::Error thrown from one is printed by main as a one-line message with exit code 1.
#pragma once

namespace kimi::app {

int cmd_score(int argc, char** argv);           // cmd_score.cpp
int cmd_make_model(int argc, char** argv);      // cmd_make_model.cpp
int cmd_inspect(int argc, char** argv);         // cmd_inspect.cpp
int cmd_quantize(int argc, char** argv);        // cmd_quantize.cpp
int cmd_tokenize(int argc, char** argv);        // cmd_tokenizer.cpp
int cmd_detokenize(int argc, char** argv);      // cmd_tokenizer.cpp
int cmd_chat_template(int argc, char** argv);   // cmd_chat_format.cpp
int cmd_chat_parse(int argc, char** argv);      // cmd_chat_format.cpp
int cmd_bench(int argc, char** argv);           // bench/cmd_bench.cpp: dispatch to the bench commands
int cmd_generate(int argc, char** argv);        // cmd_generate.cpp
int cmd_chat(int argc, char** argv);            // cmd_chat.cpp
int cmd_serve(int argc, char** argv);           // cmd_serve.cpp
int cmd_eval(int argc, char** argv);            // bench/cmd_eval.cpp: `eval gsm8k`, `eval compare`

}   // namespace kimi::app

namespace kimi::app {
int cmd_bench_tokenizer(int argc, char** argv);   // cmd_tokenizer.cpp: `bench tokenizer`
int cmd_bench_decode(int argc, char** argv);      // bench/cmd_bench_decode.cpp: `bench decode`
int cmd_bench_serve(int argc, char** argv);       // bench/cmd_bench_serve.cpp: `bench serve`
int cmd_bench_machine(int argc, char** argv);     // bench/cmd_bench_machine.cpp: `bench machine`
int cmd_bench_model(int argc, char** argv);       // bench/cmd_bench_model.cpp: `bench model`
int cmd_bench_vision(int argc, char** argv);      // bench/cmd_bench_vision.cpp: `bench vision`
int cmd_bench_matmul(int argc, char** argv);      // bench/cmd_bench_matmul.cpp: `bench matmul`
}   // namespace kimi::app
