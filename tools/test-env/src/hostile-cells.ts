/**
 * A Python cell that tries to start 300 `sleep` subprocesses and prints how many started and how many were refused
 * (`<started> <refused>`), killing and reaping what it started: what a process limit must stop.
 */
export const PROCESS_STORM_CELL = [
  'import subprocess',
  'procs, refused = [], 0',
  'for i in range(300):',
  '    try:',
  "        procs.append(subprocess.Popen(['sleep', '120']))",
  '    except OSError:',
  '        refused += 1',
  'started = len(procs)',
  'for p in procs: p.kill()',
  'for p in procs: p.wait()',
  'print(started, refused)',
].join('\n');
