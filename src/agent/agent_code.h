/* sandman-agent code: the in-sandbox side of code contexts (docs/code.md).
 *
 *   sandman-agent code start   starts the sandbox's code driver (the Python
 *                              program code_driver.py, embedded in this
 *                              binary) unless it runs; prints "running" or
 *                              "started", or says on stderr why it could not
 *                              (exit 3)
 *   sandman-agent code send    one request to the driver: stdin is one JSON
 *                              line, stdout the driver's JSON lines; when no
 *                              driver runs, the one line
 *                              {"event":"fail","code":"no_server",...}
 *
 * The driver's folder is AGENT_CODE_ROOT/<its hash>, private to the
 * sandbox's user (0700, both checked to be folders of ours and no links
 * before use). The driver
 * runs in a session of its own, its parent the sandbox's init once started,
 * with the caller's environment less every SANDMAN_ variable: a kernel is
 * no process of the call that started it, and so has no host-tool
 * identity (docs/host-tools.md, "Who is calling"). */
#ifndef SANDMAN_AGENT_CODE_H
#define SANDMAN_AGENT_CODE_H

#define AGENT_CODE_ROOT "/tmp/.sandman-code"
/* One request line at most (code, environment and all). */
#define AGENT_CODE_REQUEST_MAX (17u << 20)

/* argv[0] is "code". Returns the exit status. */
int agent_code_main(int argc, char **argv);

#endif
