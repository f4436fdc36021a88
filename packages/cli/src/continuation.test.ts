import { describe, expect, it } from 'vitest';
import { inputState, nextIndent } from './continuation.js';

describe('inputState', () => {
  it('runs complete Python lines at once', () => {
    expect(inputState('print(1+1)', 'python')).toBe('complete');
    expect(inputState('x = {"a": 1}', 'python')).toBe('complete');
    expect(inputState('s = "(:"', 'python')).toBe('complete');
    expect(inputState('x = 1  # a comment with (', 'python')).toBe('complete');
  });

  it('asks for more while brackets, triple quotes or a backslash are open', () => {
    expect(inputState('print(1,', 'python')).toBe('incomplete');
    expect(inputState('x = [1,\n 2', 'python')).toBe('incomplete');
    expect(inputState('s = """abc', 'python')).toBe('incomplete');
    expect(inputState('s = """abc\n"""', 'python')).toBe('complete');
    expect(inputState('x = 1 + \\', 'python')).toBe('incomplete');
  });

  it('waits for the empty line that ends a Python block', () => {
    expect(inputState('for i in range(3):', 'python')).toBe('block');
    expect(inputState('for i in range(3):\n    print(i)', 'python')).toBe('block');
    expect(inputState('d = {1: 2}', 'python')).toBe('complete');
  });

  it('continues R after open braces and trailing operators', () => {
    expect(inputState('cat(3)', 'r')).toBe('complete');
    expect(inputState('f <- function(x) {', 'r')).toBe('incomplete');
    expect(inputState('f <- function(x) {\n  x + 1\n}', 'r')).toBe('complete');
    expect(inputState('x <- 1 +', 'r')).toBe('incomplete');
    expect(inputState('df |>', 'r')).toBe('incomplete');
    expect(inputState('df %>%', 'r')).toBe('incomplete');
    expect(inputState('x <- "a{"', 'r')).toBe('complete');
  });
});

describe('nextIndent', () => {
  it('indents after a line ending in ":", keeps the level, and goes back after return/pass/break/continue/raise', () => {
    expect(nextIndent(['for i in range(3):'], 'python')).toBe('    ');
    expect(nextIndent(['def f():', '    if x:  # note'], 'python')).toBe('        ');
    expect(nextIndent(['def f():', '    y = 1'], 'python')).toBe('    ');
    expect(nextIndent(['def f():', '    if x:', '        return 1'], 'python')).toBe('    ');
    expect(nextIndent(['while True:', '    break'], 'python')).toBe('');
    expect(nextIndent(['f <- function() {'], 'r')).toBe('');
  });
});
