//! Splits a plan into lines of tokens, each knowing its line and column (1-based).

use super::PlanError;

#[derive(Debug, Clone, PartialEq)]
pub enum TokKind {
    /// A bare word: keyword, name, number, path, `node:execute`.
    Word,
    /// A double-quoted string, escapes resolved (`\"`, `\\`, `\n`, `\t`).
    Str,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub kind: TokKind,
    pub text: String,
    pub line: usize,
    pub col: usize,
}

/// A logical line: its tokens (a trailing `;` is dropped) and its number.
#[derive(Debug, Clone)]
pub struct Line {
    pub line: usize,
    pub tokens: Vec<Token>,
    /// Column just past the last token, for "expected ... at end of line" errors.
    pub end_col: usize,
}

pub fn lex(src: &str) -> Result<Vec<Line>, PlanError> {
    let mut out = Vec::new();
    for (i, raw) in src.lines().enumerate() {
        let lineno = i + 1;
        let chars: Vec<char> = raw.chars().collect();
        let mut toks = Vec::new();
        let mut k = 0;
        while k < chars.len() {
            let c = chars[k];
            if c.is_whitespace() {
                k += 1;
                continue;
            }
            if c == '#' {
                break;
            }
            let col = k + 1;
            if c == '"' {
                let mut s = String::new();
                k += 1;
                let mut closed = false;
                while k < chars.len() {
                    match chars[k] {
                        '"' => {
                            closed = true;
                            k += 1;
                            break;
                        }
                        '\\' if k + 1 < chars.len() => {
                            s.push(match chars[k + 1] {
                                'n' => '\n',
                                't' => '\t',
                                other => other,
                            });
                            k += 2;
                        }
                        ch => {
                            s.push(ch);
                            k += 1;
                        }
                    }
                }
                if !closed {
                    return Err(PlanError::at(lineno, col, "a closing '\"' for this string"));
                }
                toks.push(Token { kind: TokKind::Str, text: s, line: lineno, col });
                continue;
            }
            let start = k;
            while k < chars.len() && !chars[k].is_whitespace() && chars[k] != '"' && chars[k] != '#' {
                k += 1;
            }
            let text: String = chars[start..k].iter().collect();
            toks.push(Token { kind: TokKind::Word, text, line: lineno, col });
        }
        // Figure 17.11 ends declarations with ';' and nimrodg does not: accept both.
        if let Some(last) = toks.last_mut() {
            if last.kind == TokKind::Word && last.text.ends_with(';') {
                last.text.pop();
                if last.text.is_empty() {
                    toks.pop();
                }
            }
        }
        if !toks.is_empty() {
            out.push(Line { line: lineno, tokens: toks, end_col: chars.len() + 1 });
        }
    }
    Ok(out)
}
