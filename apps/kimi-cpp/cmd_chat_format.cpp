// `kimi-cpp chat-template` and `kimi-cpp chat-parse`: the tokenizer directory's conversation
// format (Kimi Linear or Kimi-K3, src/chat/) on its own — a conversation or a whole request
// body rendered to the exact prompt (text + ids) the server builds, and generated text parsed
// into the assistant message (or its stream of deltas) the server returns. K3 image parts are
// expanded as the server expands them (--no-expand-images: the placeholder text).
#include <nlohmann/json.hpp>

#include <optional>
#include <sstream>

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

namespace {

// The flags that apply to every rendered conversation.
struct RenderFlags {
    bool add_gen = false;
    std::optional<std::string> thinking, effort;
    bool special_in_content = false;
};

tok::ChatPrompt render_one(const chat::ChatFormat& format, chat::ChatRequest r, const RenderFlags& f,
                           server::MediaLoader* loader) {
    if (f.thinking) r.thinking = on_off("--thinking", *f.thinking);
    if (f.effort) r.thinking_effort = *f.effort;
    r.allow_special_in_content = f.special_in_content;
    std::vector<image::PromptImage> images;
    if (loader) r.images = loader->resolver(images);
    return format.render(r);
}

J prompt_json(const chat::ChatFormat& format, const tok::ChatPrompt& p) {
    J j;
    j["format"] = format.name();
    j["text"] = p.text;
    j["ids"] = p.ids;
    return j;
}

// --requests F.jsonl: one request body a line, one JSON line out for each ({"ids", ...} or
// {"error"}), so a training set renders in one process.
void render_requests(const chat::ChatFormat& format, const std::string& path, const RenderFlags& f,
                     server::MediaLoader* loader) {
    std::istringstream in(read_all(path));
    std::string line, out;
    for (size_t n = 1; std::getline(in, line); ++n) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        J j;
        try {
            J body = J::parse(line);
            chat::ChatRequest r = chat::chat_request_from_body(body);
            if (f.add_gen) r.add_generation_prompt = true;
            j = prompt_json(format, render_one(format, std::move(r), f, loader));
        } catch (const std::exception& e) {
            j = J{{"error", path + ":" + std::to_string(n) + ": " + e.what()}};
        }
        out += j.dump() + "\n";
    }
    write_out(out);
}

}   // namespace

int cmd_chat_template(int argc, char** argv) {
    ArgParser args("chat-template", argc, argv);
    const std::string dir = args.required("--tokenizer");
    const auto messages_path = args.opt("--messages");
    const auto request_path = args.opt("--request");
    const auto requests_path = args.opt("--requests");
    const auto tools_path = args.opt("--tools");
    RenderFlags f;
    f.add_gen = args.flag("--add-generation-prompt");
    f.thinking = args.opt("--thinking");
    f.effort = args.opt("--thinking-effort");
    f.special_in_content = args.flag("--special-in-content");
    const bool json = args.flag("--json");
    // K3 image parts: expanded into the image's tokens (the preprocessing settings of
    // --model DIR, default the tokenizer directory), or the placeholder text.
    const bool expand_images = !args.flag("--no-expand-images");
    const std::string media_dir = args.str("--model", dir);
    args.done();
    if (int(bool(messages_path)) + int(bool(request_path)) + int(bool(requests_path)) != 1)
        throw Error("chat-template: give --messages M.json, --request R.json or --requests R.jsonl");
    if (!messages_path && tools_path)
        throw Error("chat-template: --tools goes with --messages (a request carries its tools)");

    const tok::Tokenizer t = load_tokenizer_at(dir);
    const auto format = chat::chat_format_for(t);
    std::unique_ptr<server::MediaLoader> loader;
    if (expand_images) {
        server::MediaLimits any_local;
        any_local.source.allowed_local_media_path = "/";
        any_local.images_per_prompt = 1 << 20;
        loader = std::make_unique<server::MediaLoader>(image::load_media_config(media_dir), any_local, "");
    }
    if (requests_path) {
        render_requests(*format, *requests_path, f, loader.get());
        return 0;
    }
    chat::ChatRequest r;
    if (request_path) {
        r = chat::chat_request_from_body(read_json(*request_path));
        if (f.add_gen) r.add_generation_prompt = true;
    } else {
        r.messages = read_json(*messages_path);
        if (tools_path) r.tools = read_json(*tools_path);
        r.add_generation_prompt = f.add_gen;
    }
    const tok::ChatPrompt p = render_one(*format, std::move(r), f, loader.get());
    if (json) {
        write_out(prompt_json(*format, p).dump() + "\n");
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
