// `fused`: the command-line front door. Subcommands live in cmd_*.cpp and register themselves; this
// file builds the CLI11 tree from the registry ("bench kernels" nests under "bench"), parses, and runs
// the deepest subcommand the command line named.
//
// Exit status: 0 done; 1 the work failed (a file, a model, the machine); 2 the command line is wrong;
// 130 `fused run` stopped by Ctrl-C.
// Every failure is one line on stderr, "fused <command>: ...", and nothing on stdout.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include <fused/version.hpp>

#include "cli.hpp"
#include "default_model.hpp"
#include "fk_kernels.h"

namespace fused::cli::front_door {

std::string version_text() {
  std::string text = "fused " FUSED_VERSION_STRING " (";
#if defined(__clang__)
  text += "clang " __clang_version__;
#elif defined(__GNUC__)
  text += "g++ " __VERSION__;
#endif
#ifdef _OPENMP
  text += ", OpenMP";
#else
  text += ", no OpenMP";
#endif
#ifdef FUSED_HAVE_MPI
  text += ", MPI";
#endif
  text += std::string("; kernels here: ") + fk_isa_name(fk_isa_active()) + ")";
  try {
    text += "\ndefault model: " + fused::cli::default_model_dir().string();
  } catch (const std::exception& e) {
    text += std::string("\ndefault model: none (") + e.what() + ")";
  }
  return text;
}

std::string path_of(const CLI::App* app) {
  std::string path;
  for (; app && app->get_parent(); app = app->get_parent()) path = app->get_name() + (path.empty() ? "" : " " + path);
  return path;
}

// One line, whatever CLI11 wrote: the checks and tests read errors as one line on stderr.
std::string one_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  std::replace(text.begin(), text.end(), '\n', ' ');
  return fused::cli::printable(text);  // a file's bytes quoted in a message (a key of byte 0xFF) stay text
}

// The option a word names: exactly, as `--name=value`, or as `-Xvalue` for a short option X that
// takes a value; none for any other word.
const CLI::Option* named_option(const CLI::App& sub, const std::string& w) {
  if (w.size() < 2 || w[0] != '-') return nullptr;
  if (const CLI::Option* o = sub.get_option_no_throw(w.substr(0, w.find('=')))) return o;
  if (w[1] != '-') {
    const CLI::Option* o = sub.get_option_no_throw(w.substr(0, 2));
    if (o && o->get_items_expected_min() > 0) return o;
  }
  return nullptr;
}

// Words that start with '-' but are text, not flags: "-hello" as a prompt or as the text to tokenize
// (CLI11 would read "-h" and "ello"). A value that starts with '-' is joined to its option
// (`-p -x` -> `--prompt=-x`); any other word of one dash that names no option of the command goes
// after a "--", where CLI11 takes it as a positional. A word is a flag when it names an option
// exactly, is `--name=value`, or is `-Xvalue` for a short option X that takes a value; an unknown
// `--word` stays an unknown flag (refused), and `-- --word` is the text "--word".
std::vector<std::string> protect_text(const CLI::App& sub, std::vector<std::string> words) {
  const auto option = [&](const std::string& w) { return named_option(sub, w); };
  std::vector<std::string> out, text;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "--") {
      text.insert(text.end(), words.begin() + static_cast<std::ptrdiff_t>(i) + 1, words.end());
      break;
    }
    const CLI::Option* o = option(w);
    if (o && w.find('=') == std::string::npos && o->get_items_expected_min() > 0 && i + 1 < words.size() && words[i + 1].size() > 1 &&
        words[i + 1][0] == '-' && !option(words[i + 1])) {
      const auto& longs = o->get_lnames();
      out.push_back(longs.empty() ? w + words[i + 1] : "--" + longs.front() + "=" + words[i + 1]);
      ++i;
    } else if (!o && w.size() > 1 && w[0] == '-' && w[1] != '-' && !std::isdigit(static_cast<unsigned char>(w[1])) && w[1] != '.') {
      text.push_back(w);
    } else if (o && w.back() == '=' && w.find('=') == w.size() - 1 && o->get_items_expected_min() > 0) {
      out.push_back(w.substr(0, w.size() - 1));  // `--name=`: an empty value, where CLI11 would take the next word
      out.push_back("");
    } else {
      out.push_back(w);
    }
  }
  if (!text.empty()) {
    out.push_back("--");
    out.insert(out.end(), text.begin(), text.end());
  }
  return out;
}

// A list's word in brackets with an empty item ("[1,,2]", "[1, ,2]", "[,1]"): CLI11 splits such a
// word itself and drops its empty items before the option's parser (parse_ids, integer_list) sees
// them, so "[1,,2]" would pass as 1,2. Named here in integer_list's words (empty_item). `words` are
// the command's arguments as protect_text leaves them.
std::string empty_list_item(const CLI::App& sub, const std::vector<std::string>& words) {
  const auto problem = [](const CLI::Option* owner, const std::string& value) -> std::string {
    if (!owner || !owner->get_allow_extra_args() || value.size() < 2 || value.front() != '[' || value.back() != ']') return {};
    const std::string_view inside = std::string_view(value).substr(1, value.size() - 2);
    if (inside.find_first_not_of(" \t\n") == std::string_view::npos) return {};  // "[]": the option's own "missing"
    for (std::size_t begin = 0;;) {
      const std::size_t comma = std::min(inside.find(',', begin), inside.size());
      if (inside.substr(begin, comma - begin).find_first_not_of(" \t\n") == std::string_view::npos)
        return fused::cli::empty_item(owner->get_name(), value);
      if (comma == inside.size()) return {};
      begin = comma + 1;
    }
  };
  const CLI::Option* positional = nullptr;  // where words no option takes go
  for (const CLI::Option* o : sub.get_options([](const CLI::Option* o) { return o->get_positional(); }))
    if (!positional) positional = o;
  const CLI::Option* list = nullptr;  // the list option whose values the words now are
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "--") {
      for (std::size_t j = i + 1; j < words.size(); ++j)
        if (std::string p = problem(positional, words[j]); !p.empty()) return p;
      break;
    }
    const CLI::Option* o = named_option(sub, w);
    std::string p;
    if (!o) {
      p = problem(list ? list : positional, w);
    } else if (const std::size_t eq = w.find('='); eq != std::string::npos && w.compare(0, 2, "--") == 0) {
      p = problem(o, w.substr(eq + 1));
      list = nullptr;
    } else if (o->get_items_expected_min() == 0 || (w.size() > 2 && w[1] != '-')) {
      list = nullptr;  // a flag, or -Xvalue
    } else if (o->get_allow_extra_args()) {
      list = o;
    } else {
      list = nullptr;
      ++i;  // its one value
    }
    if (!p.empty()) return p;
  }
  return {};
}

}  // namespace fused::cli::front_door

// The kernels' environment variables, which they read with atoi and strcmp: a value they would
// ignore or misread (FUSED_THREADS=99999999999 asked libgomp for 272 GB) is named here instead.
std::string environment_error() {
  if (const char* threads = std::getenv("FUSED_THREADS"); threads && *threads) {
    const std::string_view text = threads;
    int n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || end != text.data() + text.size() || n < 1 || n > 1024)
      return "the environment's FUSED_THREADS=" + fused::cli::printable(text) + " is not a thread count in [1, 1024]";
  }
  // libgomp's own: a list of counts, one per nesting level. A garbled one it ignores with a warning;
  // a huge one it would try to start (OMP_NUM_THREADS=99999999999: "libgomp: Out of memory").
  if (const char* omp = std::getenv("OMP_NUM_THREADS"); omp && *omp) {
    const std::string_view text = omp;
    for (std::size_t begin = 0; begin <= text.size();) {
      const std::size_t comma = std::min(text.find(',', begin), text.size());
      std::size_t first = begin, last = comma;  // libgomp reads with strtoul, and takes spaces around
      while (first < last && std::isspace(static_cast<unsigned char>(text[first]))) ++first;
      while (last > first && std::isspace(static_cast<unsigned char>(text[last - 1]))) --last;
      if (first < last && text[first] == '+') ++first;
      long long n = 0;
      const auto [end, ec] = std::from_chars(text.data() + first, text.data() + last, n);
      if ((ec == std::errc() && end == text.data() + last && (n > 1024 || n < 0)) || ec == std::errc::result_out_of_range)
        return "the environment's OMP_NUM_THREADS=" + fused::cli::printable(text) + " is not a thread count in [1, 1024]";
      begin = comma + 1;
    }
  }
  // A name the kernels know gives its path whatever the fallback; an unknown one gives the fallback.
  if (const char* isa = std::getenv("FUSED_ISA"); isa && *isa && fk__isa_from_name(isa, FK_ISA_SCALAR) != fk__isa_from_name(isa, FK_ISA_AMX)) {
    std::string names;
    for (const fk_isa known : {FK_ISA_SCALAR, FK_ISA_AVX2, FK_ISA_AVX512BF16, FK_ISA_AMX}) names += (names.empty() ? "" : ", ") + std::string(fk_isa_name(known));
    return "the environment's FUSED_ISA=" + fused::cli::printable(isa) + " is not one of " + names;
  }
  return {};
}

int main(int argc, char** argv) {
  using namespace fused::cli::front_door;
  if (const std::string error = environment_error(); !error.empty()) {
    std::fprintf(stderr, "fused: %s\n", error.c_str());
    return 2;
  }
  CLI::App app{"fused: a neural network as a compile-time program (static plans, BF16 kernels, C generator)", "fused"};
  app.set_version_flag("--version", version_text(), "print the version, the compiler and the kernels this CPU runs, then exit");
  app.require_subcommand(1);
  app.option_defaults()->always_capture_default();
  app.get_formatter()->column_width(34);
  app.footer("Each command answers --help with its flags. Exit status: 0 done, 1 the work failed, 2 the command line is wrong, 130 stopped by Ctrl-C.");

  // Parents before children, whatever order the static registrations ran in.
  std::vector<const fused::cli::entry*> entries;
  for (const auto& e : fused::cli::registry()) entries.push_back(&e);
  std::sort(entries.begin(), entries.end(), [](const auto* a, const auto* b) {
    const auto words_a = std::count(a->name.begin(), a->name.end(), ' '), words_b = std::count(b->name.begin(), b->name.end(), ' ');
    return words_a != words_b ? words_a < words_b : a->name < b->name;
  });
  std::map<std::string, CLI::App*> apps;
  std::map<const CLI::App*, fused::cli::runner> runners;
  for (const auto* e : entries) {
    const auto space = e->name.rfind(' ');
    CLI::App* parent = space == std::string::npos ? &app : apps.at(e->name.substr(0, space));
    CLI::App* sub = parent->add_subcommand(space == std::string::npos ? e->name : e->name.substr(space + 1), e->summary);
    apps[e->name] = sub;
    runners[sub] = e->setup(*sub);
  }

  if (argc >= 2 && std::string(argv[1]) == "help") {  // `fused help [command]`, as `fused [command] --help`
    const CLI::App* which = &app;
    if (argc > 2) {
      std::string command = argv[2];
      for (int i = 3; i < argc; ++i) command += std::string(" ") + argv[i];
      if (!apps.count(command)) {
        std::fprintf(stderr, "fused help: unknown command '%s' (see fused --help)\n", command.c_str());
        return 2;
      }
      which = apps.at(command);
    }
    const std::string parent = path_of(which->get_parent());
    std::printf("%s", which->help(which == &app ? "" : parent.empty() ? "fused" : "fused " + parent).c_str());
    return 0;
  }
  if (argc >= 2 && argv[1][0] == '-' && std::strcmp(argv[1], "-h") != 0 && std::strcmp(argv[1], "--help") != 0 && std::strcmp(argv[1], "--version") != 0) {
    // `fused -t 2 run`: CLI11 would blame run for "2 -t"
    std::fprintf(stderr, "fused: %s: fused itself takes only --help and --version; a command's options follow it (fused COMMAND [OPTIONS])\n",
                 fused::cli::printable(argv[1]).c_str());
    return 2;
  }
  if (argc >= 2 && argv[1][0] != '-' && !apps.count(argv[1])) {  // CLI11 would say "a subcommand is required"
    std::fprintf(stderr, "fused: unknown command '%s' (see fused --help)\n", argv[1]);
    return 2;
  }
  // The command's words (one or two), then its arguments with text that starts with '-' protected.
  std::vector<std::string> words(argv + 1, argv + argc);
  std::size_t command_words = 0;
  const CLI::App* asks_help = nullptr;  // a command given -h/--help: its help, whatever else is wrong
  if (!words.empty() && apps.count(words[0])) command_words = words.size() > 1 && apps.count(words[0] + " " + words[1]) ? 2 : 1;
  if (command_words > 0) {
    const std::string name = command_words == 2 ? words[0] + " " + words[1] : words[0];
    const CLI::App& command = *apps.at(name);
    std::vector<std::string> rest = protect_text(command, {words.begin() + static_cast<std::ptrdiff_t>(command_words), words.end()});
    for (const std::string& word : rest) {
      if (word == "--") break;  // text from here on
      if (word == "-h" || word == "--help") asks_help = &command;
    }
    if (const std::string problem = empty_list_item(command, rest); !problem.empty() && !asks_help) {
      std::fprintf(stderr, "fused %s: %s\n", name.c_str(), problem.c_str());
      return 2;
    }
    // `-temp 0` is -t with the value "emp" to CLI11 ("--threads: 'emp' is not an integer"): a word of
    // one dash that is a long option's name gets that said instead.
    for (const std::string& word : rest) {
      if (word == "--") break;
      if (word.size() < 3 || word[0] != '-' || word[1] == '-' || asks_help) continue;
      const std::string as_long = "-" + word.substr(0, word.find('='));
      if (command.get_option_no_throw(as_long) != nullptr) {
        std::fprintf(stderr,
                     "fused %s: %s: an option of more than one letter takes two dashes: %s (text that starts with '-' is given as "
                     "--NAME=TEXT; see fused %s --help)\n",
                     name.c_str(), fused::cli::printable(word).c_str(), as_long.c_str(), name.c_str());
        return 2;
      }
    }
    // Text where the command takes none: CLI11 would read "-hq" after the "--" as -h and -q, print the
    // help and exit 0, the work not done.
    const auto dashes = std::find(rest.begin(), rest.end(), "--");
    if (dashes != rest.end() && dashes + 1 != rest.end() && !asks_help &&
        command.get_options([](const CLI::Option* o) { return o->get_positional(); }).empty()) {
      std::string unexpected;
      for (auto it = dashes + 1; it != rest.end(); ++it) unexpected += " " + fused::cli::printable(*it);
      std::fprintf(stderr, "fused %s: The following argument%s not expected:%s (see fused %s --help)\n", name.c_str(),
                   rest.end() - dashes > 2 ? "s were" : " was", unexpected.c_str(), name.c_str());
      return 2;
    }
    words.resize(command_words);
    words.insert(words.end(), rest.begin(), rest.end());
  }
  std::reverse(words.begin(), words.end());  // CLI11 takes the arguments last first
  const CLI::App* chosen = &app;
  try {
    app.parse(words);
    for (const CLI::App* next = &app; next; ) {  // the deepest subcommand named
      chosen = next;
      const auto subs = next->get_subcommands();
      next = subs.empty() ? nullptr : subs.front();
    }
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    if (argc > 2) {  // CLI11 answers --version before it reads what follows
      std::fprintf(stderr, "fused: --version takes no other arguments (see fused --help)\n");
      return 2;
    }
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (asks_help) {  // `fused plan --help --mode x`: CLI11 checks the values first
      const std::string parent = path_of(asks_help->get_parent());
      std::printf("%s", asks_help->help(parent.empty() ? "fused" : "fused " + parent).c_str());
      return 0;
    }
    std::string where;
    const CLI::App* deepest = &app;
    for (const CLI::App* a = &app; a; ) {  // the subcommand the error belongs to, as far as parsed
      where = path_of(a);
      deepest = a;
      const auto subs = a->get_subcommands();
      a = subs.empty() ? nullptr : subs.front();
    }
    std::string message = one_line(e.what());
    // CLI11 lists unexpected arguments in the order it took them, last first (see the reverse above):
    // the command's own list has them as given.
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr && !deepest->remaining().empty()) {
      message = deepest->remaining().size() == 1 ? "The following argument was not expected:" : "The following arguments were not expected:";
      for (const std::string& word : deepest->remaining()) message += word.find(' ') == std::string::npos ? " " + word : " '" + word + "'";
    }
    std::fprintf(stderr, "fused%s%s: %s (see fused %s%s--help)\n", where.empty() ? "" : " ", where.c_str(), message.c_str(),
                 where.c_str(), where.empty() ? "" : " ");
    return 2;
  }
  const std::string name = path_of(chosen);
  try {
    const int status = runners.at(chosen)();
    // Output lost on a full disk or a closed pipe is a failure, not a success with nothing to show.
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
      std::fprintf(stderr, "fused %s: error: cannot write the output to stdout: %s\n", name.c_str(), std::strerror(errno));
      return status == 0 ? 1 : status;
    }
    return status;
  } catch (const fused::cli::usage_error& e) {
    std::fprintf(stderr, "fused %s: %s\n", name.c_str(), one_line(e.what()).c_str());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "fused %s: error: out of memory (an allocation this machine could not give)\n", name.c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fused %s: error: %s\n", name.c_str(), one_line(e.what()).c_str());
    return 1;
  }
}
