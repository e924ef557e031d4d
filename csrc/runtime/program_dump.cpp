#include "runtime/program_dump.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace tpu::runtime {

namespace {
// Creates `path` if it does not exist yet and writes `text` to it; false otherwise.
bool write_new_file(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  size_t written = 0;
  while (written < text.size()) {
    ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  ::close(fd);
  if (written == text.size()) return true;
  ::unlink(path.c_str());  // no truncated program under this name
  return false;
}
}  // namespace

std::string dump_program(const std::string& program, const std::string& label) {
  const char* directory = std::getenv("TORCH_TPU_DUMP_PROGRAMS");
  if (directory == nullptr || *directory == '\0') return "";
  static std::atomic<int> next{0};
  std::string name = label.empty() ? "program" : label;
  for (char& c : name) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '.' || c == '-';
    if (!plain) c = '_';
  }
  char number[16];
  std::snprintf(number, sizeof number, "%05d", next.fetch_add(1));
  std::string path = std::string(directory) + "/" + number + "-" + name + ".mlir";
  if (write_new_file(path, program)) return path;
  // Several processes dumping into one folder (test workers, ranks): the second to take a
  // number adds its process id instead of overwriting the first's program.
  path = std::string(directory) + "/" + number + "_" + std::to_string(::getpid()) + "-" + name +
         ".mlir";
  return write_new_file(path, program) ? path : "";
}

}  // namespace tpu::runtime
