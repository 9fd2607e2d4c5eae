/* bench/run.sh's stand-in for `git commit` as the parent of the pre-commit
 * hook. Compiled to a file named `git` and run as `git commit -- HOOK ARGS`,
 * it runs HOOK ARGS as its child and waits, as git runs a hook: the hook then
 * sees git's commit as its caller (src/hooks/committer.rs) and proves only
 * the tree git writes, which is what every `git commit` pays. */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
  int i = 1;
  while (i < argc && strcmp(argv[i], "--") != 0) i++;
  if (i + 1 >= argc) return 2;
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    execv(argv[i + 1], argv + i + 1);
    _exit(127);
  }
  int status;
  if (waitpid(pid, &status, 0) < 0) return 1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
