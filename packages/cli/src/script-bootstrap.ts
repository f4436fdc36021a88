import { createHash, randomBytes } from 'node:crypto';
import type { ExecuteResult } from '@kernelwarden/core';
import type { Language } from './args.js';

/**
 * What makes a kernel of `kernelwarden run` behave like the interpreter it stands in for: code run silently on each
 * new kernel of the command (its first, and any the watchdog restarts), before the script's cell.
 *
 * Python (IPython 8 and 9, ipykernel 6 and 7):
 * - the cell whose text is the script's (matched by its SHA-256) is compiled under the script's name — its absolute
 *   path, `<string>` for `-c`, `<stdin>` for `-` — instead of `Cell In[1]`: IPython's compiler is asked for the cell's
 *   name, and answers with that one without recording it as a cell. The text is put in `linecache` under that name,
 *   so source lines show even where the kernel cannot read the file (and for `-c`, as Python 3.13 shows them).
 * - a traceback is Python's own (`Traceback (most recent call last):`, `File "job.py", line 5, in <module>`), from
 *   the script's first frame (IPython's frames left out, and ipykernel's under `input()`); a syntax error is
 *   Python's too.
 * - `SystemExit` — `sys.exit(n)`, `raise SystemExit(n)`, and `exit()`/`quit()`, which raise it as in `python` (not
 *   IPython's `ask_exit`) — ends the cell without a traceback or IPython's "To exit: use 'exit'…" warning; a
 *   non-integer code is printed to stderr and becomes 1, as in `python`; the reply carries the status as its
 *   `evalue` (`SystemExit`, `"3"`).
 * - what the code sees does not change otherwise: the same namespace, `__name__ == '__main__'`, IPython's magics and
 *   display of the last expression.
 *
 * R (IRkernel): `quit()`/`q()` stop the cell with an error the CLI recognises by a random marker and the status
 * (`quit(status = 3)`), instead of IRkernel's `ask_exit`, which runs on; they are found before base's on the search
 * path (an environment attached as `kernelwarden:run`), and run `.Last()` as base's do. The cell whose text is the
 * script's is parsed with its source file named as the script (its absolute path, `<string>` for `-c`, `<stdin>` for
 * `-`): `evaluate`'s `parse_all` is wrapped for that text alone, and each top-level expression keeps its source
 * reference as it runs, so IRkernel's traceback gives every call its line and file — the top-level call's too
 * (`1. f()   # at line 4 of file /work/boom.R`), and a syntax error names its place as Rscript does
 * (`/work/boom.R:3:0`).
 */
export interface ScriptBootstrap {
  /** Code for each new kernel of the script's language. */
  readonly code: string;
  /** The exit status the script asked for (`sys.exit(3)`, `quit(status = 3)`), or undefined when it did not. */
  exitStatus(result: ExecuteResult): number | undefined;
  /** True for the error output of such an exit (not shown: the interpreter shows none). */
  isExit(error: { ename: string; evalue: string }): boolean;
}

/** The name a script's tracebacks give it: `python`'s (`<string>` for `-c`, `<stdin>` for `-`). */
export type ScriptName = { kind: 'file'; path: string } | { kind: 'code' } | { kind: 'stdin' };

function pythonLiteral(text: string): string {
  // A JSON string is a Python string literal (the same escapes); U+2028/9 are fine in Python source.
  return JSON.stringify(text);
}

function pythonBootstrap(name: ScriptName, code: string): string {
  const filename = name.kind === 'file' ? name.path : name.kind === 'code' ? '<string>' : '<stdin>';
  const digest = createHash('sha256').update(code, 'utf8').digest('hex');
  // One line for IPython to take in: its input transformers and AST passes run over every line of a cell, most of
  // what the setup's 80 lines cost it. Python compiles them.
  return `exec(compile(${pythonLiteral(pythonSetup(filename, digest))}, '<kernelwarden-run-setup>', 'exec'))\n`;
}

function pythonSetup(filename: string, digest: string): string {
  return `def __kernelwarden_run_setup(filename, digest, register):
    import hashlib, linecache, sys, traceback, warnings
    ip = get_ipython()
    warnings.filterwarnings('ignore', message="To exit: use 'exit', 'quit', or Ctrl-D.")
    compiler = ip.compile
    cache = compiler.cache
    def named_cache(transformed_code, number=0, raw_code=None):
        raw = transformed_code if raw_code is None else raw_code
        if hashlib.sha256(raw.encode('utf-8', 'surrogatepass')).hexdigest() != digest:
            return cache(transformed_code, number, raw_code)
        if register:
            linecache.cache[filename] = (len(raw), None, [line + '\\n' for line in raw.splitlines()], filename)
        return filename
    compiler.cache = named_cache
    def exit_status(value):
        code = value.code
        if code is None:
            return 0
        if isinstance(code, int):
            return int(code)
        print(code, file=sys.stderr)
        return 1
    import os, ipykernel
    internal = os.path.dirname(ipykernel.__file__) + os.sep
    def script_frames(tb):
        first = tb
        while first is not None and first.tb_frame.f_code.co_filename != filename:
            first = first.tb_next
        return first or tb
    show = ip.showtraceback
    def showtraceback(exc_tuple=None, *args, **kwargs):
        try:
            etype, value, tb = exc_tuple if exc_tuple is not None else sys.exc_info()
            if etype is None:
                return show(exc_tuple, *args, **kwargs)
            if issubclass(etype, SystemExit):
                value.args = (exit_status(value),)
                return None
            report = traceback.TracebackException(etype, value, script_frames(tb))
            # ipykernel's own frames under input()/getpass() (its stdin request): python shows none there.
            while len(report.stack) > 1 and report.stack[-1].filename.startswith(internal):
                report.stack.pop()
            lines = list(report.format())
            ip._showtraceback(etype, value, [''.join(lines).rstrip('\\n')])
        except Exception:
            return show(exc_tuple, *args, **kwargs)
    def showsyntaxerror(*args, **kwargs):
        etype, value, tb = sys.exc_info()
        try:
            ip._showtraceback(etype, value, [''.join(traceback.format_exception_only(etype, value)).rstrip('\\n')])
        except Exception:
            return show()
    ip.showtraceback = showtraceback
    ip.showsyntaxerror = showsyntaxerror
    class Quitter:
        def __init__(self, name):
            self.name = name
        def __repr__(self):
            return 'Use %s() or Ctrl-D (i.e. EOF) to exit' % self.name
        def __call__(self, code=None):
            raise SystemExit(code)
    ip.user_ns['exit'] = Quitter('exit')
    ip.user_ns['quit'] = Quitter('quit')
__kernelwarden_run_setup(${pythonLiteral(filename)}, ${pythonLiteral(digest)}, True)
del __kernelwarden_run_setup
`;
}

/**
 * An R string literal of `text` in ASCII: JSON's escapes are R's (`\n`, `\"`, `\\`, `\uXXXX`), and every other
 * character is written as `\U{…}`, so what the kernel reads does not depend on its locale.
 */
function rLiteral(text: string): string {
  return JSON.stringify(text).replace(/[^\x20-\x7e]/gu, (char) => `\\U{${char.codePointAt(0)?.toString(16)}}`);
}

function rBootstrap(marker: string, name: ScriptName, code: string): string {
  const filename = name.kind === 'file' ? name.path : name.kind === 'code' ? '<string>' : '<stdin>';
  return `local({
  quitter <- function(save = "default", status = 0, runLast = TRUE) {
    if (isTRUE(runLast) && exists(".Last", envir = .GlobalEnv, inherits = FALSE)) get(".Last", envir = .GlobalEnv)()
    status <- suppressWarnings(as.integer(status))
    if (length(status) != 1L || is.na(status)) status <- 0L
    stop(structure(class = c("kernelwarden_exit", "error", "condition"),
      list(message = paste("${marker}", status), call = NULL)))
  }
  env <- new.env()
  assign("quit", quitter, envir = env)
  assign("q", quitter, envir = env)
  if ("kernelwarden:run" %in% search()) detach("kernelwarden:run", character.only = TRUE)
  attach(env, name = "kernelwarden:run", warn.conflicts = FALSE)
})
local({
  script <- ${rLiteral(code)}
  script_name <- ${rLiteral(filename)}
  bytes <- ${Buffer.byteLength(code, 'utf8')}
  ns <- asNamespace("evaluate")
  original <- get("parse_all", envir = ns)
  original <- if (is.null(attr(original, "kernelwarden_original"))) original else attr(original, "kernelwarden_original")
  located <- function(exprs) {
    refs <- attr(exprs, "srcref", exact = TRUE)
    if (!is.expression(exprs) || length(refs) != length(exprs)) return(exprs)
    for (i in seq_along(exprs)) {
      block <- call("{", exprs[[i]])
      attr(block, "srcref") <- list(refs[[i]], refs[[i]])
      exprs[[i]] <- block
    }
    exprs
  }
  named <- function(x, filename = NULL, ...) {
    is_script <- is.null(filename) && is.character(x) && length(x) == 1L && !is.na(x) &&
      nchar(x, type = "bytes") == bytes && identical(enc2utf8(x), script)
    if (!is_script) return(original(x, filename, ...))
    # One final newline is the end of the last line (evaluate would count another, empty one after it).
    parsed <- original(sub("\\n$", "", x), script_name, ...)
    tryCatch({
      if (is.data.frame(parsed) && is.list(parsed$expr)) parsed$expr <- I(lapply(parsed$expr, located))
      parsed
    }, error = function(e) parsed)
  }
  attr(named, "kernelwarden_original") <- original
  locked <- bindingIsLocked("parse_all", ns)
  if (locked) unlockBinding("parse_all", ns)
  assign("parse_all", named, envir = ns)
  if (locked) lockBinding("parse_all", ns)
})
`;
}

/** The bootstrap of `kernelwarden run` for a script in `language`, named `name`, whose text is `code`. */
export function scriptBootstrap(language: Language, name: ScriptName, code: string): ScriptBootstrap {
  if (language === 'python') {
    return {
      code: pythonBootstrap(name, code),
      exitStatus: (result) => {
        if (result.error?.ename !== 'SystemExit') return undefined;
        const status = Number.parseInt(result.error.evalue, 10);
        // As the operating system does with python's status: the low 8 bits (sys.exit(256) exits 0, -1 is 255).
        return Number.isInteger(status) ? status & 0xff : 1;
      },
      isExit: (error) => error.ename === 'SystemExit',
    };
  }
  const marker = `kernelwarden-exit-${randomBytes(8).toString('hex')}`;
  const pattern = new RegExp(`${marker} (-?\\d+)`);
  return {
    code: rBootstrap(marker, name, code),
    exitStatus: (result) => {
      const match = result.error ? pattern.exec(result.error.evalue) : null;
      return match ? Number(match[1]) & 0xff : undefined;
    },
    isExit: (error) => pattern.test(error.evalue),
  };
}
