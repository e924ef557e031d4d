#include "runtime/crash_report.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <signal.h>
#include <ucontext.h>
#include <unwind.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "runtime/env_switch.h"

namespace tpu::runtime {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
constexpr int kSignalCount = sizeof(kSignals) / sizeof(kSignals[0]);
struct sigaction previous[kSignalCount];
std::atomic<bool> installed{false};
std::atomic<bool> reporting{false};
std::atomic<bool> reported{false};

// The executable code of the unwinder (libgcc_s), found at install. backtrace() runs the
// unwinder, which holds a lock while it searches its tables: a fault inside it (a table
// whose code was unmapped) would deadlock the handler's own backtrace().
uintptr_t unwinder_begin = 0;
uintptr_t unwinder_end = 0;

int find_code_of(struct dl_phdr_info* info, size_t /*size*/, void* data) {
  const auto address = *static_cast<uintptr_t*>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& header = info->dlpi_phdr[i];
    if (header.p_type != PT_LOAD || (header.p_flags & PF_X) == 0) continue;
    const uintptr_t begin = info->dlpi_addr + header.p_vaddr;
    if (address >= begin && address < begin + header.p_memsz) {
      unwinder_begin = begin;
      unwinder_end = begin + header.p_memsz;
      return 1;
    }
  }
  return 0;
}

uintptr_t faulting_instruction(void* context) {
  if (context == nullptr) return 0;
  const auto* machine = &static_cast<ucontext_t*>(context)->uc_mcontext;
#if defined(__x86_64__)
  return static_cast<uintptr_t>(machine->gregs[REG_RIP]);
#elif defined(__aarch64__)
  return static_cast<uintptr_t>(machine->pc);
#else
  (void)machine;
  return 0;
#endif
}

// Only async-signal-safe calls from here on: write(2), no allocation, no stdio.
void write_text(const char* text) {
  size_t left = std::strlen(text);
  while (left > 0) {
    ssize_t written = write(STDERR_FILENO, text, left);
    if (written <= 0) return;
    text += written;
    left -= static_cast<size_t>(written);
  }
}

void write_number(unsigned long long value, int base) {
  char digits[32];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[value % base];
    value /= base;
  } while (value != 0 && n < 32);
  char text[36];
  int at = 0;
  if (base == 16) {
    text[at++] = '0';
    text[at++] = 'x';
  }
  while (n > 0) text[at++] = digits[--n];
  text[at] = '\0';
  write_text(text);
}

const char* signal_name(int signal) {
  switch (signal) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGABRT: return "SIGABRT";
    default: return "signal";
  }
}

// The handler that was there before for `signal`.
struct sigaction* previous_for(int signal) {
  for (int i = 0; i < kSignalCount; ++i) {
    if (kSignals[i] == signal) return &previous[i];
  }
  return nullptr;
}

void report(int signal, siginfo_t* info, void* context) {
  // si_code > 0: the kernel raised it for a fault of this thread's instruction; otherwise
  // it was sent (kill, raise, abort), and si_addr means nothing.
  const bool fault = info != nullptr && info->si_code > 0;
  struct sigaction* before = previous_for(signal);
  if (!fault && before != nullptr && !(before->sa_flags & SA_SIGINFO) &&
      before->sa_handler == SIG_IGN) {
    return;  // a sent signal the process ignored before us stays ignored
  }
  if (!reporting.exchange(true)) {
    const long thread = syscall(SYS_gettid);
    char name[17] = {0};
    prctl(PR_GET_NAME, name, 0, 0, 0);
    write_text("\ntorch_tpu: fatal ");
    write_text(signal_name(signal));
    if (fault) {
      write_text(" at address ");
      write_number(reinterpret_cast<unsigned long long>(info->si_addr), 16);
    }
    write_text(" in thread ");
    write_number(static_cast<unsigned long long>(thread), 10);
    write_text(" \"");
    write_text(name);
    write_text(thread == getpid() ? "\" (the main thread)" : "\" (not the main thread)");
    const uintptr_t at = fault ? faulting_instruction(context) : 0;
    if (at != 0 && at >= unwinder_begin && at < unwinder_end) {
      write_text(": the fault is inside the C++ unwinder (libgcc_s), whose lock it holds, so its"
                 " native stack cannot be walked. The unwinder reads the tables of all loaded"
                 " code: a frequent cause is code unmapped while still registered, e.g. a JIT"
                 " that could not map memory (too many mappings: vm.max_map_count)\n");
    } else {
      write_text("; its native stack:\n");
      void* frames[64];
      int depth = backtrace(frames, 64);
      backtrace_symbols_fd(frames, depth, STDERR_FILENO);
      write_text("torch_tpu: end of the native stack\n");
    }
    reported = true;
  } else {
    // Another thread is reporting: let it finish (for at most two seconds) before the
    // process goes.
    struct timespec pause {
      0, 10 * 1000 * 1000
    };
    for (int i = 0; i < 200 && !reported.load(); ++i) nanosleep(&pause, nullptr);
  }
  // Hand the signal to the handler that was there before. A fault returns, so the
  // instruction faults again under that handler with the real fault's information (what
  // ASan's or Python's handler read); a sent signal is sent again.
  if (before != nullptr) sigaction(signal, before, nullptr);
  if (!fault) raise(signal);
}

}  // namespace

void install_crash_report() {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (installed.load() || !env_switch("TORCH_TPU_CRASH_REPORT", true)) return;
  // backtrace() loads libgcc on its first call, which allocates: do it now, not in the
  // handler.
  void* warm[1];
  backtrace(warm, 1);
  auto unwinder = reinterpret_cast<uintptr_t>(&_Unwind_Backtrace);
  dl_iterate_phdr(find_code_of, &unwinder);
  struct sigaction action {};
  action.sa_sigaction = report;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  sigemptyset(&action.sa_mask);
  for (int i = 0; i < kSignalCount; ++i) sigaction(kSignals[i], &action, &previous[i]);
  installed = true;
}

bool crash_report_installed() { return installed.load(); }

}  // namespace tpu::runtime
