//! What every command prints: one value, shown to people as text (lines and tables) or to
//! programs as JSON (`--json`). A command builds the value and calls [`emit`]; the choice between
//! the two forms is made here only, so a new command cannot print one form and forget the other.

use anyhow::Result;
use comfy_table::Table;
use serde::Serialize;
use std::fmt::{self, Display};

/// Fails before long work when `--out DIR` could not hold its files: `dir`, or the nearest of
/// its ancestors that exists, is not a directory. An experiment found out only once it had run
/// (minutes, for the longer ones) and was about to write.
pub fn check_out_dir(dir: &std::path::Path) -> Result<()> {
    let nearest = dir.ancestors().find(|a| a.as_os_str().is_empty() || a.exists());
    match nearest {
        Some(a) if !a.as_os_str().is_empty() && !a.is_dir() => {
            let which = if a == dir { String::new() } else { format!(" ({} is a file)", a.display()) };
            anyhow::bail!(
                "--out {}: not a directory{which} (the experiment writes several files into it)",
                dir.display()
            )
        }
        _ => Ok(()),
    }
}

/// Fails before long work when `flag FILE` could not be written: its directory is not one, or
/// the file's name is a directory's. (Whether it may be written is only known by writing.)
pub fn check_out_file(file: &std::path::Path, flag: &str) -> Result<()> {
    let parent = file.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    if !parent.is_dir() {
        anyhow::bail!("{flag} {}: {} is not a directory", file.display(), parent.display());
    }
    if file.is_dir() {
        anyhow::bail!("{flag} {}: is a directory; give a file name", file.display());
    }
    Ok(())
}

/// A command's answer: its JSON is what serde writes of it, its text is [`Render::text`].
pub trait Render: Serialize {
    /// What people read: lines and tables, each ending with a line break.
    fn text(&self) -> Text;
}

/// Prints `v` on standard output: pretty JSON with `json`, else its text, with what would
/// command the reader's terminal shown as escapes (`Text::shown`).
pub fn emit<R: Render + ?Sized>(v: &R, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(v)?);
    } else {
        print!("{}", v.text().shown());
    }
    Ok(())
}

/// Text for people, built a line (or a table) at a time.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Text {
    text: String,
    /// Printed byte for byte (`Text::verbatim`).
    verbatim: bool,
}

/// Whether `c` is left out of what a command prints for people, as its escape: control
/// characters but the line break and the tab (an escape sequence can retitle the reader's
/// terminal, move its cursor, rewrite what is on screen, or on some terminals answer back into
/// its input; a carriage return overwrites the line it ends), and the marks that reorder text
/// right to left (a line that reads other than it is).
fn hidden(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

impl Text {
    pub fn new() -> Text {
        Text::default()
    }

    /// Text printed as it is, byte for byte: a job's own output (`libra output`, as `cat` would
    /// show its file) or a file the command writes (a man page, a completion script).
    pub fn verbatim(s: &str) -> Text {
        Text { text: s.to_string(), verbatim: true }
    }

    /// Adds `l` and a line break (a table is a block of lines).
    pub fn line(mut self, l: impl Display) -> Text {
        use fmt::Write;
        let _ = writeln!(self.text, "{l}");
        self
    }

    /// Adds `s` as it is (text that carries its own line breaks).
    pub fn raw(mut self, s: &str) -> Text {
        self.text.push_str(s);
        self
    }

    /// The text as printed for people: strings of other users' choosing (a job's command, its
    /// working directory, a reason an agent quotes) reach an administrator's terminal, so what
    /// would command it (`hidden`) is shown as its escape (`\u{1b}`), unless the text is
    /// verbatim.
    pub fn shown(&self) -> std::borrow::Cow<'_, str> {
        if self.verbatim || !self.text.chars().any(hidden) {
            return std::borrow::Cow::Borrowed(&self.text);
        }
        let mut out = String::with_capacity(self.text.len() + 16);
        for c in self.text.chars() {
            if hidden(c) {
                out.extend(c.escape_unicode());
            } else {
                out.push(c);
            }
        }
        std::borrow::Cow::Owned(out)
    }

    /// Adds `l` only when there is one.
    pub fn line_if(self, l: Option<impl Display>) -> Text {
        match l {
            Some(l) => self.line(l),
            None => self,
        }
    }
}

impl Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl From<String> for Text {
    fn from(s: String) -> Text {
        Text::new().line(s)
    }
}

/// A one-off answer: `json` for programs, a text already written for people (a sentence, a
/// table). For a command whose people's form is a line or two about the value it got back.
#[derive(Serialize)]
#[serde(transparent)]
pub struct Said<'a, T: Serialize + ?Sized> {
    json: &'a T,
    #[serde(skip)]
    text: Text,
}

impl<'a, T: Serialize + ?Sized> Said<'a, T> {
    pub fn new(json: &'a T, text: impl Into<Text>) -> Self {
        Said { json, text: text.into() }
    }
}

impl<T: Serialize + ?Sized> Render for Said<'_, T> {
    fn text(&self) -> Text {
        self.text.clone()
    }
}

/// A table for people, with this header. On a terminal its columns are wrapped to the terminal's
/// width (comfy-table asks the terminal); in a pipe it stays as wide as its content, for grep and
/// friends.
pub fn table<S: AsRef<str>>(header: &[S]) -> Table {
    let mut t = Table::new();
    t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(comfy_table::ContentArrangement::Dynamic)
        .set_header(header.iter().map(|h| h.as_ref()));
    t
}

/// A table with this header and these rows.
pub fn filled_table<S: AsRef<str>, R: Into<comfy_table::Row>>(
    header: &[S],
    rows: impl IntoIterator<Item = R>,
) -> Table {
    let mut t = table(header);
    t.add_rows(rows);
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value as a command would print it: rows for people, fields for programs.
    #[derive(Serialize)]
    struct Balance {
        user: String,
        cents: i64,
    }

    impl Render for Balance {
        fn text(&self) -> Text {
            let mut t = table(&["USER", "CENTS"]);
            t.add_row(vec![self.user.clone(), self.cents.to_string()]);
            Text::new().line(format!("balance of {}", self.user)).line(t)
        }
    }

    #[test]
    fn one_value_gives_its_table_and_its_json() {
        let b = Balance { user: "alice".into(), cents: 1250 };
        let text = b.text().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "balance of alice");
        assert!(lines.iter().any(|l| l.contains("USER") && l.contains("CENTS")), "{text}");
        assert!(lines.iter().any(|l| l.contains("alice") && l.contains("1250")), "{text}");
        assert!(text.ends_with('\n'));
        let json: serde_json::Value = serde_json::to_value(&b).unwrap();
        assert_eq!(json, serde_json::json!({"user": "alice", "cents": 1250}));
    }

    #[test]
    fn said_is_its_value_in_json_and_its_sentence_in_text() {
        let v = serde_json::json!({"id": 7, "state": "RUNNING"});
        let s = Said::new(&v, format!("job {} is now {}", v["id"], v["state"].as_str().unwrap()));
        assert_eq!(s.text().to_string(), "job 7 is now RUNNING\n");
        // Transparent: the JSON is the value's own, not wrapped in the adaptor's fields.
        assert_eq!(serde_json::to_value(&s).unwrap(), v);
    }

    #[test]
    fn a_table_is_its_header_and_rows_and_text_keeps_raw_text_as_it_is() {
        let mut t = table(&[String::from("a"), String::from("b")]);
        t.add_row(vec!["1", "2"]);
        let shown = t.to_string();
        assert!(shown.contains('a') && shown.contains('b') && shown.contains('1'), "{shown}");
        assert_eq!(
            Text::new().raw("x|y|\n").line_if(None::<&str>).line_if(Some("z")).to_string(),
            "x|y|\nz\n"
        );
    }

    #[test]
    fn what_would_command_a_terminal_is_shown_as_its_escape_unless_verbatim() {
        let hostile = "a\u{1b}]0;owned\u{7}b\rc\u{9b}2Jd\u{202e}e\tf";
        let t = Text::new().line(hostile);
        assert_eq!(t.shown(), "a\\u{1b}]0;owned\\u{7}b\\u{d}c\\u{9b}2Jd\\u{202e}e\tf\n");
        assert_eq!(Text::verbatim(hostile).shown(), hostile);
        assert!(matches!(Text::new().line("plain").shown(), std::borrow::Cow::Borrowed(_)));
    }
}

/// An error and its causes on one line, as `{:#}` writes them, leaving out a cause whose text the
/// line already holds: many errors (an I/O error's wrapper, the HTTP client's) name their cause in
/// their own message, and the chain would repeat it.
pub fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.is_empty() {
            line = text;
        } else if !text.is_empty() && !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

#[cfg(test)]
mod error_line_tests {
    use super::error_line;

    /// An error that names its cause in its message and also gives it as its source.
    #[derive(Debug)]
    struct Open {
        path: String,
        source: std::io::Error,
    }

    impl std::fmt::Display for Open {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "cannot open {}: {}", self.path, self.source)
        }
    }

    impl std::error::Error for Open {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    #[test]
    fn causes_are_written_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e =
            anyhow::Error::new(Open { path: "t.swf".into(), source: io }).context("cannot read trace t.swf");
        assert_eq!(error_line(&e), "cannot read trace t.swf: cannot open t.swf: no such file");
        // A cause the message does not name is still written.
        let e = anyhow::anyhow!("disk full").context("saving the plan");
        assert_eq!(error_line(&e), "saving the plan: disk full");
        assert_eq!(error_line(&e), format!("{e:#}"));
    }
}
