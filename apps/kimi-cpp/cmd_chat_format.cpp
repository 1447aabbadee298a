// `kimi-cpp chat-template` and `kimi-cpp chat-parse`: the tokenizer directory's conversation
// format (Kimi Linear or Kimi-K3, src/chat/) on its own — a conversation or a whole request
// body rendered to the exact prompt (text + ids) the server builds, and generated text parsed
// into the assistant message (or its stream of deltas) the server returns. K3 image parts are
// expanded as the server expands them (--no-expand-images: the placeholder text).
#include <nlohmann/json.hpp>

#include "args.h"
#include "chat/chat_format.h"
#include "chat/chat_json.h"
#include "commands.h"
#include "core/error.h"
#include "engine_options.h"
#include "image/image_input.h"
#include "server/media_loader.h"
#include "text_io.h"

namespace kimi::app {

namespace {

using J = nlohmann::ordered_json;

J read_json(const std::string& path) {
    try {
        return J::parse(read_all(path));
    } catch (const nlohmann::json::exception& e) {
        throw Error(path + ": invalid JSON: " + e.what());
    }
}

bool on_off(const std::string& flag, const std::string& v) {
    if (v == "on") return true;
    if (v == "off") return false;
    throw Error(flag + " must be on or off");
}

}   // namespace

int cmd_chat_template(int argc, char** argv) {
    ArgParser args("chat-template", argc, argv);
    const std::string dir = args.required("--tokenizer");
    const auto messages_path = args.opt("--messages");
    const auto request_path = args.opt("--request");
    const auto tools_path = args.opt("--tools");
    const bool add_gen = args.flag("--add-generation-prompt");
    const auto thinking = args.opt("--thinking");
    const auto effort = args.opt("--thinking-effort");
    const bool special_in_content = args.flag("--special-in-content");
    const bool json = args.flag("--json");
    // K3 image parts: expanded into the image's tokens (the preprocessing settings of
    // --model DIR, default the tokenizer directory), or the placeholder text.
    const bool expand_images = !args.flag("--no-expand-images");
    const std::string media_dir = args.str("--model", dir);
    args.done();
    if (bool(messages_path) == bool(request_path))
        throw Error("chat-template: give --messages M.json or --request R.json");
    if (request_path && tools_path)
        throw Error("chat-template: --tools goes with --messages (a request carries its tools)");

    const tok::Tokenizer t = load_tokenizer_at(dir);
    const auto format = chat::chat_format_for(t);
    chat::ChatRequest r;
    if (request_path) {
        r = chat::chat_request_from_body(read_json(*request_path));
        if (add_gen) r.add_generation_prompt = true;
    } else {
        r.messages = read_json(*messages_path);
        if (tools_path) r.tools = read_json(*tools_path);
        r.add_generation_prompt = add_gen;
    }
    if (thinking) r.thinking = on_off("--thinking", *thinking);
    if (effort) r.thinking_effort = *effort;
    r.allow_special_in_content = special_in_content;
    std::vector<image::PromptImage> images;
    std::unique_ptr<server::MediaLoader> loader;
    if (expand_images) {
        server::MediaLimits any_local;
        any_local.source.allowed_local_media_path = "/";
        any_local.images_per_prompt = 1 << 20;
        loader = std::make_unique<server::MediaLoader>(image::load_media_config(media_dir), any_local, "");
        r.images = loader->resolver(images);
    }
    const tok::ChatPrompt p = format->render(r);
    if (json) {
        J j;
        j["format"] = format->name();
        j["text"] = p.text;
        j["ids"] = p.ids;
        write_out(j.dump() + "\n");
    } else {
        std::string out = p.text + "\n";
        for (size_t i = 0; i < p.ids.size(); ++i) out += (i ? "," : "") + std::to_string(p.ids[i]);
        write_out(out + "\n");
    }
    return 0;
}

int cmd_chat_parse(int argc, char** argv) {
    ArgParser args("chat-parse", argc, argv);
    const std::string dir = args.required("--tokenizer");
    const std::string input = args.required("--input");
    const auto thinking = args.opt("--thinking");
    const bool stream = args.flag("--stream");
    args.done();
    const tok::Tokenizer t = load_tokenizer_at(dir);
    const auto format = chat::chat_format_for(t);
    const std::string text = read_all(input);
    auto parser = format->new_parser(thinking ? on_off("--thinking", *thinking) : true);
    std::vector<chat::Delta> deltas;
    // Fed in small pieces, as a stream of tokens would arrive; the result does not depend on it.
    for (size_t at = 0; at < text.size(); at += 7) parser->push(std::string_view(text).substr(at, 7), deltas);
    parser->finish(deltas);
    std::string out;
    if (stream) {
        for (const chat::Delta& d : chat::merge_deltas(deltas)) out += chat::delta_json(d).dump() + "\n";
    } else {
        out = chat::message_json(parser->message()).dump() + "\n";
    }
    write_out(out);
    return 0;
}

}   // namespace kimi::app
