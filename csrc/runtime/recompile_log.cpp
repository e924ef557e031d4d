#include "runtime/recompile_log.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace tpu::runtime {

namespace {

std::atomic<bool>& enabled_flag() {
  static std::atomic<bool> flag{[] {
    const char* env = std::getenv("TORCH_TPU_LOG_RECOMPILES");
    return env != nullptr && *env != '\0' && std::strcmp(env, "0") != 0;
  }()};
  return flag;
}

// The comma-separated items of the bracketed list opening at text[open] ("(").
std::vector<std::string> list_at(const std::string& text, size_t open) {
  std::vector<std::string> items;
  if (open >= text.size()) return items;
  int depth = 0;
  std::string item;
  for (size_t i = open + 1; i < text.size(); ++i) {
    char c = text[i];
    if (c == '(' || c == '<' || c == '{' || c == '[') depth += 1;
    if (c == ')' || c == '>' || c == '}' || c == ']') {
      if (depth == 0) break;
      depth -= 1;
    }
    if (c == ',' && depth == 0) {
      items.push_back(item);
      item.clear();
      if (i + 1 < text.size() && text[i + 1] == ' ') ++i;
      continue;
    }
    item += c;
  }
  if (!item.empty()) items.push_back(item);
  return items;
}

struct Parsed {
  std::vector<std::string> parameters;  // "%arg0: tensor<3xf32>"
  std::vector<std::string> results;     // "tensor<3xf32>"
  std::vector<std::string> body;        // every line but the signature
  std::vector<size_t> body_line;        // their line numbers in the program (from 1)
};

Parsed parse(const std::string& program) {
  Parsed parsed;
  bool signature_seen = false;
  size_t number = 0;
  size_t start = 0;
  while (start < program.size()) {
    size_t end = program.find('\n', start);
    if (end == std::string::npos) end = program.size();
    std::string line = program.substr(start, end - start);
    number += 1;
    size_t main = line.find("@main(");
    if (main != std::string::npos && !signature_seen) {
      signature_seen = true;
      size_t open = main + 5;
      parsed.parameters = list_at(line, open);
      size_t arrow = line.find(") -> (", open);
      if (arrow != std::string::npos) parsed.results = list_at(line, arrow + 5);
    } else {
      parsed.body.push_back(line);
      parsed.body_line.push_back(number);
    }
    start = end + 1;
  }
  return parsed;
}

// `text` around `at`, at most ~70 characters, trimmed of indentation.
std::string excerpt(const std::string& text, size_t at) {
  size_t begin = text.find_first_not_of(' ');
  if (begin == std::string::npos) return "";
  if (at > begin + 30) begin = at - 30;
  std::string shown = text.substr(begin, 70);
  if (begin > 0 && text.find_first_not_of(' ') < begin) shown = "..." + shown;
  if (begin + 70 < text.size()) shown += "...";
  return shown;
}

std::string type_of(const std::string& parameter) {
  size_t colon = parameter.find(": ");
  return colon == std::string::npos ? parameter : parameter.substr(colon + 2);
}

std::vector<std::string> signature_differences(const Parsed& old, const Parsed& now) {
  std::vector<std::string> out;
  if (old.parameters.size() != now.parameters.size()) {
    out.push_back(std::to_string(old.parameters.size()) + " parameters -> " +
                  std::to_string(now.parameters.size()));
  }
  for (size_t i = 0; i < std::min(old.parameters.size(), now.parameters.size()); ++i) {
    if (old.parameters[i] != now.parameters[i]) {
      out.push_back(old.parameters[i] + " -> " + type_of(now.parameters[i]));
    }
  }
  if (old.results.size() != now.results.size()) {
    out.push_back(std::to_string(old.results.size()) + " results -> " +
                  std::to_string(now.results.size()));
  }
  for (size_t i = 0; i < std::min(old.results.size(), now.results.size()); ++i) {
    if (old.results[i] != now.results[i]) {
      out.push_back("result " + std::to_string(i) + ": " + old.results[i] + " -> " +
                    now.results[i]);
    }
  }
  return out;
}

size_t body_distance(const Parsed& old, const Parsed& now) {
  size_t common = std::min(old.body.size(), now.body.size());
  size_t distance = std::max(old.body.size(), now.body.size()) - common;
  for (size_t i = 0; i < common; ++i) distance += old.body[i] != now.body[i];
  return distance;
}

std::string first_body_difference(const Parsed& old, const Parsed& now) {
  size_t common = std::min(old.body.size(), now.body.size());
  for (size_t i = 0; i < common; ++i) {
    const std::string& a = old.body[i];
    const std::string& b = now.body[i];
    if (a == b) continue;
    size_t at =
        std::mismatch(a.begin(), a.begin() + std::min(a.size(), b.size()), b.begin()).first -
        a.begin();
    return "line " + std::to_string(now.body_line[i]) + ": `" + excerpt(a, at) + "` -> `" +
           excerpt(b, at) + "`";
  }
  return std::to_string(old.body.size()) + " lines -> " + std::to_string(now.body.size());
}

}  // namespace

std::string explain_compile(const std::vector<std::string>& earlier, const std::string& program) {
  if (earlier.empty()) return "new op";
  Parsed now = parse(program);
  Parsed nearest;
  std::vector<std::string> nearest_signature;
  size_t best = std::numeric_limits<size_t>::max();
  for (const std::string& text : earlier) {
    if (text == program) return "same program as before (the in-memory cache was cleared)";
    Parsed old = parse(text);
    std::vector<std::string> signature = signature_differences(old, now);
    // A differing signature weighs more than any number of differing body lines.
    size_t distance = signature.size() * 1000000 + body_distance(old, now);
    if (distance < best) {
      best = distance;
      nearest = std::move(old);
      nearest_signature = std::move(signature);
    }
  }
  if (!nearest_signature.empty()) {
    std::string detail;
    for (size_t i = 0; i < nearest_signature.size() && i < 3; ++i) {
      detail += (i ? ", " : "") + nearest_signature[i];
    }
    if (nearest_signature.size() > 3) {
      detail += ", and " + std::to_string(nearest_signature.size() - 3) + " more";
    }
    return "new shapes, dtypes or layout (" + detail + ")";
  }
  return "new graph structure (" + first_body_difference(nearest, now) + ")";
}

bool RecompileLog::enabled() { return enabled_flag().load(); }

void RecompileLog::set_enabled(bool on) { enabled_flag().store(on); }

std::string RecompileLog::explain(const std::string& label, const std::string& program) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::deque<std::string>& history = history_[label];
  std::string why = explain_compile({history.begin(), history.end()}, program);
  // An op's first program is a "new op"; that of a graph or an unlabelled program is new too.
  if (why == "new op" && label.find("::") == std::string::npos) {
    why = "new " + (label.empty() ? std::string("program") : label);
  }
  if (std::find(history.begin(), history.end(), program) == history.end()) {
    history.push_back(program);
    if (history.size() > kHistoryPerLabel) history.pop_front();
  }
  return why;
}

void RecompileLog::write(const std::string& line) {
  std::string whole = "[torch_tpu] " + line + "\n";
  std::fwrite(whole.data(), 1, whole.size(), stderr);
  std::fflush(stderr);
}

}  // namespace tpu::runtime
