// The linear-time JSON builder (see json_linear.h).
#include "core/json_linear.h"

#include <cstddef>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kimi {
namespace {

using J = nlohmann::ordered_json;

class Builder : public nlohmann::json_sax<J> {
public:
    explicit Builder(J& root) : root_(root) {}

    bool null() override { return put(J(nullptr)); }
    bool boolean(bool v) override { return put(J(v)); }
    bool number_integer(number_integer_t v) override { return put(J(v)); }
    bool number_unsigned(number_unsigned_t v) override { return put(J(v)); }
    bool number_float(number_float_t v, const string_t&) override { return put(J(v)); }
    bool string(string_t& v) override { return put(J(std::move(v))); }
    bool binary(binary_t& v) override { return put(J::binary(std::move(v))); }
    bool start_object(std::size_t) override { return open(J::object()); }
    bool start_array(std::size_t) override { return open(J::array()); }
    bool key(string_t& k) override {
        key_ = std::move(k);
        return true;
    }
    bool end_object() override { return close(); }
    bool end_array() override { return close(); }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
        // rethrown as its own type, as J::parse does (the parser reports syntax errors as
        // parse_error, ids 1xx, and too-large numbers as out_of_range, ids 4xx)
        if (e.id / 100 == 4) throw static_cast<const nlohmann::json::out_of_range&>(e);
        throw static_cast<const nlohmann::json::parse_error&>(e);
    }

private:
    struct Open {
        J* value;
        std::unordered_map<std::string, size_t> keys;   // objects: key → index in the ordered map
    };

    // Places v where the parser is: the root, the next array element, or the current key.
    J* place(J&& v) {
        if (stack_.empty()) {
            root_ = std::move(v);
            return &root_;
        }
        Open& top = stack_.back();
        if (top.value->is_array()) {
            auto& arr = top.value->get_ref<J::array_t&>();
            arr.push_back(std::move(v));
            return &arr.back();
        }
        auto& obj = top.value->get_ref<J::object_t&>();   // a vector of pairs: append in O(1)
        auto [it, fresh] = top.keys.emplace(key_, obj.size());
        if (!fresh) {   // a repeated key: first place, last value
            auto& slot = (obj.begin() + std::ptrdiff_t(it->second))->second;
            slot = std::move(v);
            return &slot;
        }
        obj.emplace_back(key_, std::move(v));
        return &obj.back().second;
    }
    bool put(J&& v) {
        place(std::move(v));
        return true;
    }
    // Containers are filled in place: their address stays valid while they are open, since
    // nothing is appended to their parent until they close.
    bool open(J&& v) {
        stack_.push_back({place(std::move(v)), {}});
        return true;
    }
    bool close() {
        stack_.pop_back();
        return true;
    }

    J& root_;
    std::vector<Open> stack_;
    std::string key_;
};

}   // namespace

J parse_json_linear(std::string_view text) {
    J root;
    Builder b(root);
    J::sax_parse(text, &b);
    return root;
}

}   // namespace kimi
