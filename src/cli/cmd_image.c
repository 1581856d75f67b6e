/* sandman image build NAME|DIR [--tag REF]
 *
 * NAME is a folder under images/ (found through $SANDMAN_IMAGES_DIR, else
 * the current directory and its parents, else next to this binary); a DIR
 * is any argument with a '/' in it, or "." or "..". A folder with a
 * rootfs.sh has it run first as `rootfs.sh --tar STAGE/rootfs.tar` (the
 * convention of images/minimal): the tar joins the context, and the
 * Dockerfile ADDs it. Progress goes to stderr, the image id to stdout. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sandman/image.h>

#include "cli.h"

extern char **environ;

#define IMAGE_PATH_MAX 4096

static int file_exists(const char *dir, const char *name) {
  char path[IMAGE_PATH_MAX];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int dir_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* images/NAME in start and each of its parents. */
static int find_upwards(const char *start, const char *name, char *out, size_t len) {
  char dir[IMAGE_PATH_MAX];
  snprintf(dir, sizeof dir, "%s", start);
  for (;;) {
    snprintf(out, len, "%s/images/%s", strcmp(dir, "/") == 0 ? "" : dir, name);
    if (dir_exists(out)) return 1;
    if (strcmp(dir, "/") == 0 || dir[0] == '\0') return 0;
    char *slash = strrchr(dir, '/');
    if (slash == dir) dir[1] = '\0';
    else if (slash) *slash = '\0';
    else return 0;
  }
}

static int resolve_folder(const char *arg, char *out, size_t len) {
  int is_path = strchr(arg, '/') != NULL || strcmp(arg, ".") == 0 || strcmp(arg, "..") == 0;
  if (is_path) {
    if (!dir_exists(arg)) {
      cli_error("image folder %s: no such directory", arg);
      return CLI_EXIT_USAGE;
    }
    if (realpath(arg, out) == NULL) {
      cli_error("image folder %s: %s", arg, strerror(errno));
      return CLI_EXIT_USAGE;
    }
    return 0;
  }
  if (arg[0] == '\0' || arg[0] == '.') {
    cli_error("image name '%s' is not a folder name", arg);
    return CLI_EXIT_USAGE;
  }
  char found[IMAGE_PATH_MAX] = "";
  const char *env = getenv("SANDMAN_IMAGES_DIR");
  if (env && env[0]) {
    snprintf(found, sizeof found, "%s/%s", env, arg);
    if (!dir_exists(found)) {
      cli_error("no image folder %s in SANDMAN_IMAGES_DIR (%s)", arg, env);
      return CLI_EXIT_USAGE;
    }
  } else {
    char cwd[IMAGE_PATH_MAX], exe[IMAGE_PATH_MAX];
    int ok = getcwd(cwd, sizeof cwd) != NULL && find_upwards(cwd, arg, found, sizeof found);
    if (!ok && realpath("/proc/self/exe", exe) != NULL) {
      /* build/sandman -> images/ beside build/; bin/sandman -> share/sandman/images. */
      char *bindir = dirname(exe);
      snprintf(found, sizeof found, "%s/../images/%s", bindir, arg);
      ok = dir_exists(found);
      if (!ok) {
        snprintf(found, sizeof found, "%s/../share/sandman/images/%s", bindir, arg);
        ok = dir_exists(found);
      }
    }
    if (!ok) {
      cli_error("no image folder images/%s in the current directory, its parents or beside "
                "the sandman binary; set SANDMAN_IMAGES_DIR, or give a path (./%s)",
                arg, arg);
      return CLI_EXIT_USAGE;
    }
  }
  if (realpath(found, out) == NULL) {
    cli_error("image folder %s: %s", found, strerror(errno));
    return CLI_EXIT_USAGE;
  }
  return 0;
}

/* Runs DIR/rootfs.sh --tar STAGE/rootfs.tar; its stdout goes to our stderr
 * so that stdout carries only the image id. */
static int run_rootfs_script(const char *folder, const char *name, const char *stage) {
  char script[IMAGE_PATH_MAX], tar[IMAGE_PATH_MAX], exe[IMAGE_PATH_MAX];
  snprintf(script, sizeof script, "%s/rootfs.sh", folder);
  snprintf(tar, sizeof tar, "%s/rootfs.tar", stage);
  /* The scripts learn which sandman runs them (images/sandman packs it). */
  if (realpath("/proc/self/exe", exe) != NULL) setenv("SANDMAN_EXE", exe, 1);
  setenv("SANDMAN_IMAGE_NAME", name, 1);
  setenv("SANDMAN_IMAGE_FOLDER", folder, 1);

  char sh[] = "/bin/sh", tar_flag[] = "--tar";
  char *argv_exec[] = {script, tar_flag, tar, NULL};
  char *argv_sh[] = {sh, script, tar_flag, tar, NULL};
  char **argv = access(script, X_OK) == 0 ? argv_exec : argv_sh;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  pid_t pid;
  cli_note("running %s --tar %s", script, tar);
  fflush(stderr);
  int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    cli_error("cannot run %s: %s", script, strerror(rc));
    return CLI_EXIT_FAILURE;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      cli_error("waiting for %s: %s", script, strerror(errno));
      return CLI_EXIT_FAILURE;
    }
  }
  if (WIFSIGNALED(status)) {
    cli_error("%s was killed by signal %d", script, WTERMSIG(status));
    return CLI_EXIT_FAILURE;
  }
  if (WEXITSTATUS(status) != 0) {
    cli_error("%s exited with status %d; nothing was sent to the engine", script,
              WEXITSTATUS(status));
    return CLI_EXIT_FAILURE;
  }
  struct stat st;
  if (stat(tar, &st) != 0 || !S_ISREG(st.st_mode)) {
    cli_error("%s succeeded but wrote no %s", script, tar);
    return CLI_EXIT_FAILURE;
  }
  return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st; (void)flag; (void)ftw;
  if (remove(path) != 0) cli_note("cannot remove %s: %s", path, strerror(errno));
  return 0;
}

/* Removes the staging directory without following links or leaving it. */
static void remove_tree(const char *dir) {
  nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

static void on_progress(void *ud, const char *line) {
  (void)ud;
  fprintf(stderr, "%s\n", line);
}

int cmd_image_build(const cli_call *call) {
  const cli_globals *g = call->g;
  const char *tag_arg = cli_str(call, "tag");
  char folder[IMAGE_PATH_MAX];
  int rc = resolve_folder(call->args[0], folder, sizeof folder);
  if (rc != 0) return rc;
  char base_buf[IMAGE_PATH_MAX];
  snprintf(base_buf, sizeof base_buf, "%s", folder);
  const char *name = basename(base_buf);

  char tag[SM_IMAGE_REF_MAX];
  if (tag_arg) snprintf(tag, sizeof tag, "%s", tag_arg);
  else snprintf(tag, sizeof tag, "sandman/%s:latest", name);
  sm_error err = SM_ERROR_INIT;
  sm_image_ref parsed;
  if (sm_image_ref_parse(tag, &parsed, &err) != 0) {
    cli_error("--tag: %s", err.message);
    return CLI_EXIT_USAGE;
  }
  if (parsed.digest[0] != '\0') {
    cli_error("--tag %s: a tag cannot carry a digest (the engine computes it)", tag);
    return CLI_EXIT_USAGE;
  }
  if (!file_exists(folder, "Dockerfile")) {
    cli_error("%s has no Dockerfile: an image folder needs one", folder);
    return CLI_EXIT_USAGE;
  }

  /* Check the engine before a long rootfs.sh. */
  sm_config *cfg = NULL;
  if (sm_config_load(&cfg, g->config_path, &err) != 0) return cli_fail(&err);
  sm_engine_options eo;
  cli_engine_options(g, cfg, &eo);
  sm_engine *engine = NULL;
  int erc = sm_engine_new(&engine, &eo, &err);
  if (erc == 0) erc = sm_engine_negotiate(engine, &err);
  sm_config_free(cfg); /* eo's strings are copied by sm_engine_new */
  if (erc != 0) {
    sm_engine_free(engine);
    return cli_fail(&err);
  }

  char stage[IMAGE_PATH_MAX] = "";
  if (file_exists(folder, "rootfs.sh")) {
    const char *tmp = getenv("TMPDIR");
    snprintf(stage, sizeof stage, "%s/sandman-image-%s-XXXXXX", tmp && tmp[0] ? tmp : "/var/tmp",
             name);
    if (mkdtemp(stage) == NULL) {
      cli_error("creating a staging directory %s: %s", stage, strerror(errno));
      sm_engine_free(engine);
      return CLI_EXIT_FAILURE;
    }
    rc = run_rootfs_script(folder, name, stage);
    if (rc != 0) {
      remove_tree(stage);
      sm_engine_free(engine);
      return rc;
    }
  }

  sm_image_build_options bo = SM_IMAGE_BUILD_OPTIONS_INIT;
  bo.context_dir = folder;
  bo.staged_dir = stage[0] ? stage : NULL;
  bo.tag = tag;
  bo.progress = on_progress;
  char id[SM_ENGINE_ID_MAX];
  rc = sm_image_build(engine, &bo, id, &err);
  if (stage[0]) remove_tree(stage);
  sm_engine_free(engine);
  if (rc != 0) return cli_fail(&err);
  cli_note("built %s (%s); pin it as %s@%s", tag, id, parsed.name, id);
  printf("%s\n", id);
  fflush(stdout);
  return CLI_EXIT_OK;
}


/* ---- image load ---- */

static ssize_t read_fd(void *ud, char *buf, size_t len) {
  int fd = *(int *)ud;
  for (;;) {
    ssize_t n = read(fd, buf, len);
    if (n >= 0) return n;
    if (errno != EINTR) return SM_EIO;
  }
}

/* The engine's progress messages: "Loaded image: sandman/general:latest". */
static void on_load_progress(void *ud, json_object *msg) {
  (void)ud;
  json_object *v = NULL;
  if (json_object_object_get_ex(msg, "stream", &v) && v) {
    const char *s = json_object_get_string(v);
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == '\n') n--;
    if (n) cli_note("%.*s", (int)n, s);
  }
}

int cmd_image_load(const cli_call *call) {
  const char *file = call->args[0];
  int fd = strcmp(file, "-") == 0 ? STDIN_FILENO : open(file, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    cli_error("image load: %s: %s", file, strerror(errno));
    return CLI_EXIT_USAGE;
  }
  sm_error err = SM_ERROR_INIT;
  sm_config *cfg = NULL;
  int rc = sm_config_load(&cfg, call->g->config_path, &err);
  sm_engine *engine = NULL;
  if (rc == 0) {
    sm_engine_options eo;
    cli_engine_options(call->g, cfg, &eo);
    rc = sm_engine_new(&engine, &eo, &err);
    if (rc == 0) rc = sm_engine_negotiate(engine, &err);
    if (rc == 0) rc = sm_engine_image_load(engine, read_fd, &fd, on_load_progress, NULL, &err);
  }
  if (fd != STDIN_FILENO) close(fd);
  sm_engine_free(engine);
  sm_config_free(cfg);
  return rc ? cli_fail(&err) : CLI_EXIT_OK;
}
