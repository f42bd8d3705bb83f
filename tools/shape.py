#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Size rules of the tree, checked by the host tests.

  tools/shape.py

- No Rust file of drivers/ or rust/ has more than 800 lines of code: lines that are neither
  blank nor comments, before the file's test module (`#[cfg(test)]` / `#![cfg(test)]`).
- No function in drivers/ takes more than 6 parameters (`self` not counted): what travels
  together goes in a context struct.
- No function in drivers/ or rust/ runs over 100 lines, from its `fn` line to its closing
  brace (test modules aside): a reader holds it whole; a longer one is cut along its own match
  arms.
Prints each violation; the exit status is 1 if there is one.
"""
import os, re, subprocess, sys

TOP = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
MAX_LOC, MAX_PARAMS, MAX_FN_LINES = 800, 6, 100


def code_part(text):
    m = re.search(r'^\s*#!?\[cfg\(test\)\]', text, re.M)
    return text[:m.start()] if m else text


def loc(text):
    return sum(1 for line in code_part(text).split('\n')
               if line.strip() and not line.strip().startswith('//'))


def split_top(params):
    parts, depth, cur = [], 0, ''
    for c in params:
        if c in '(<[{':
            depth += 1
        elif c in ')>]}':
            depth -= 1
        if c == ',' and depth == 0:
            parts.append(cur)
            cur = ''
        else:
            cur += c
    parts.append(cur)
    return [p for p in parts if p.strip() and not re.match(r'\s*&?\s*(\'\w+\s+)?(mut\s+)?self\b', p)]


def functions(text):
    """(name, parameters, first line, lines) of each function with a body."""
    text = re.sub(r'//[^\n]*', lambda m: ' ' * len(m.group(0)), code_part(text))
    for m in re.finditer(r'\bfn\s+(\w+)\s*(<[^{(]*?>)?\s*\(', text):
        i, depth = m.end(), 1
        j = i
        while depth and j < len(text):
            depth += {'(': 1, ')': -1}.get(text[j], 0)
            j += 1
        params = text[i:j - 1].replace('->', '  ')
        first = text.count('\n', 0, m.start()) + 1
        # The body: the first `{` after the signature at bracket depth 0 (a `;` first: none).
        k, depth = j, 0
        while k < len(text):
            c = text[k]
            if c in '(<[':
                depth += 1
            elif c in ')>]' and not (c == '>' and text[k - 1] == '-'):
                depth -= 1
            elif c == ';' and depth <= 0:
                k = -1
                break
            elif c == '{' and depth <= 0:
                break
            k += 1
        lines = 0
        if 0 <= k < len(text):
            end, depth = k, 0
            while end < len(text):
                depth += {'{': 1, '}': -1}.get(text[end], 0)
                if depth == 0:
                    break
                end += 1
            lines = text.count('\n', 0, end) + 2 - first
        yield m.group(1), len(split_top(params)), first, lines


def main():
    files = subprocess.check_output(['git', 'ls-files', 'drivers/*.rs', 'rust/*.rs'], cwd=TOP,
                                    text=True).split()
    bad = 0
    for f in files:
        text = open(os.path.join(TOP, f)).read()
        n = loc(text)
        if n > MAX_LOC:
            print(f'shape: {f}: {n} lines of code (at most {MAX_LOC})')
            bad += 1
        for name, count, line, lines in functions(text):
            if f.startswith('drivers/') and count > MAX_PARAMS:
                print(f'shape: {f}:{line}: fn {name} takes {count} parameters (at most {MAX_PARAMS})')
                bad += 1
            if lines > MAX_FN_LINES:
                print(f'shape: {f}:{line}: fn {name} runs {lines} lines (at most {MAX_FN_LINES})')
                bad += 1
    print(f'shape: {len(files)} files, {bad} over the limits')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
