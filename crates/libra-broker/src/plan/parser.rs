//! Plan file parser: one declaration or command per line.

use super::lexer::{lex, Line, TokKind, Token};
use super::{
    subst::substitute, Command, Domain, ExecKind, FileRef, Loc, ParamType, Parameter, Plan, PlanError, Step,
    Stream, BUILTIN_VARS,
};

/// Parses a plan and checks that every `$name` it uses is a parameter or a built-in.
pub fn parse(src: &str) -> Result<Plan, PlanError> {
    let lines = lex(src)?;
    let mut plan = Plan::default();
    let mut i = 0;
    let mut seen_main = false;
    let mut seen_nodestart = false;
    while i < lines.len() {
        let l = &lines[i];
        let first = &l.tokens[0];
        match first.text.as_str() {
            "parameter" => {
                let p = parse_parameter(l)?;
                if plan.parameters.iter().any(|q| q.name == p.name) {
                    return Err(PlanError::found(
                        l.line,
                        l.tokens[1].col,
                        "a parameter name not declared before",
                        &p.name,
                    ));
                }
                if BUILTIN_VARS.contains(&p.name.as_str()) {
                    return Err(PlanError::found(
                        l.line,
                        l.tokens[1].col,
                        "a parameter name that is not built in (jobname, nimrod_jobindex, OS)",
                        &p.name,
                    ));
                }
                plan.parameters.push(p);
                i += 1;
            }
            "task" => {
                let name = l
                    .tokens
                    .get(1)
                    .ok_or_else(|| PlanError::at(l.line, l.end_col, "a task name: main or nodestart"))?;
                if let Some(extra) = l.tokens.get(2) {
                    return Err(PlanError::found(
                        l.line,
                        extra.col,
                        "end of line after the task name",
                        &extra.text,
                    ));
                }
                let (seen, which) = match name.text.as_str() {
                    "main" => (&mut seen_main, true),
                    "nodestart" => (&mut seen_nodestart, false),
                    other => {
                        return Err(PlanError::found(
                            l.line,
                            name.col,
                            "a task name: main or nodestart",
                            other,
                        ))
                    }
                };
                if *seen {
                    return Err(PlanError::found(l.line, name.col, "each task defined once", &name.text));
                }
                *seen = true;
                let mut steps = Vec::new();
                i += 1;
                loop {
                    let Some(cl) = lines.get(i) else {
                        return Err(PlanError::at(l.line, l.tokens[0].col, "'endtask' to close this task"));
                    };
                    i += 1;
                    if cl.tokens[0].text == "endtask" {
                        if let Some(extra) = cl.tokens.get(1) {
                            return Err(PlanError::found(
                                cl.line,
                                extra.col,
                                "end of line after 'endtask'",
                                &extra.text,
                            ));
                        }
                        break;
                    }
                    steps.push(Step { line: cl.line, command: parse_command(cl)? });
                }
                if which {
                    plan.main = steps;
                } else {
                    plan.nodestart = steps;
                }
            }
            other => return Err(PlanError::found(l.line, first.col, "'parameter' or 'task'", other)),
        }
    }
    if !seen_main {
        return Err(PlanError::at(
            lines.last().map_or(1, |l| l.line),
            1,
            "a 'task main' ... 'endtask' block",
        ));
    }
    check_vars(&plan, &lines)?;
    Ok(plan)
}

fn word<'a>(l: &'a Line, k: usize, expected: &str) -> Result<&'a Token, PlanError> {
    l.tokens.get(k).ok_or_else(|| PlanError::at(l.line, l.end_col, expected))
}

fn keyword(l: &Line, k: usize, kw: &str) -> Result<(), PlanError> {
    let t = word(l, k, &format!("'{kw}'"))?;
    if t.kind == TokKind::Word && t.text == kw {
        Ok(())
    } else {
        Err(PlanError::found(l.line, t.col, format!("'{kw}'"), &t.text))
    }
}

fn number(l: &Line, k: usize, ty: ParamType, what: &str) -> Result<f64, PlanError> {
    let t = word(l, k, what)?;
    let v: Option<f64> = match ty {
        ParamType::Integer => t.text.parse::<i64>().ok().map(|v| v as f64),
        _ => t.text.parse::<f64>().ok().filter(|v| v.is_finite()),
    };
    let kind = if ty == ParamType::Integer { "an integer" } else { "a number" };
    v.ok_or_else(|| PlanError::found(l.line, t.col, format!("{kind} ({what})"), &t.text))
}

fn end(l: &Line, k: usize) -> Result<(), PlanError> {
    match l.tokens.get(k) {
        None => Ok(()),
        Some(t) => Err(PlanError::found(l.line, t.col, "end of line", &t.text)),
    }
}

fn parse_parameter(l: &Line) -> Result<Parameter, PlanError> {
    let name = word(l, 1, "a parameter name")?;
    if name.kind != TokKind::Word
        || !name.text.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        || !name.text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(PlanError::found(
            l.line,
            name.col,
            "a parameter name (letters, digits, '_')",
            &name.text,
        ));
    }
    let mut k = 2;
    let mut label = None;
    if l.tokens.get(k).is_some_and(|t| t.text == "label") {
        let t = word(l, k + 1, "a quoted label")?;
        label = Some(t.text.clone());
        k += 2;
    }
    let tt = word(l, k, "a type: integer, float, text or files")?;
    let ty = match tt.text.as_str() {
        "integer" => ParamType::Integer,
        "float" => ParamType::Float,
        "text" => ParamType::Text,
        "files" => ParamType::Files,
        other => {
            return Err(PlanError::found(l.line, tt.col, "a type: integer, float, text or files", other))
        }
    };
    k += 1;
    let dt = word(l, k, "a domain: default, range, random or select")?;
    let numeric = matches!(ty, ParamType::Integer | ParamType::Float);
    let domain = match dt.text.as_str() {
        "default" => {
            let v = word(l, k + 1, "a default value")?;
            if numeric {
                number(l, k + 1, ty, "the default value")?;
            }
            end(l, k + 2)?;
            Domain::Default(v.text.clone())
        }
        "range" | "random" if !numeric => {
            return Err(PlanError::found(
                l.line,
                dt.col,
                "default or select for a text or files parameter",
                &dt.text,
            ));
        }
        "range" => {
            keyword(l, k + 1, "from")?;
            let from = number(l, k + 2, ty, "the start of the range")?;
            keyword(l, k + 3, "to")?;
            let to = number(l, k + 4, ty, "the end of the range")?;
            let (mut step, mut points) = (None, None);
            match l.tokens.get(k + 5).map(|t| t.text.as_str()) {
                None => {}
                Some("step") => {
                    let s = number(l, k + 6, ty, "the step")?;
                    if s == 0.0 || (to - from) * s < 0.0 {
                        let t = &l.tokens[k + 6];
                        return Err(PlanError::found(
                            l.line,
                            t.col,
                            "a non-zero step that goes from the start towards the end",
                            &t.text,
                        ));
                    }
                    step = Some(s);
                    end(l, k + 7)?;
                }
                Some("points") => {
                    points = Some(count(l, k + 6)?);
                    end(l, k + 7)?;
                }
                Some(_) => {
                    let t = &l.tokens[k + 5];
                    return Err(PlanError::found(l.line, t.col, "'step', 'points' or end of line", &t.text));
                }
            }
            Domain::Range { from, to, step, points }
        }
        "random" => {
            keyword(l, k + 1, "from")?;
            let from = number(l, k + 2, ty, "the lower bound")?;
            keyword(l, k + 3, "to")?;
            let to = number(l, k + 4, ty, "the upper bound")?;
            if to < from {
                return Err(PlanError::at(
                    l.line,
                    l.tokens[k + 4].col,
                    "an upper bound not below the lower bound",
                ));
            }
            let points = match l.tokens.get(k + 5) {
                None => 1,
                Some(t) if t.text == "points" => {
                    let n = count(l, k + 6)?;
                    end(l, k + 7)?;
                    n
                }
                Some(t) => return Err(PlanError::found(l.line, t.col, "'points' or end of line", &t.text)),
            };
            Domain::Random { from, to, points }
        }
        "select" => {
            keyword(l, k + 1, "anyof")?;
            let vals: Vec<String> =
                l.tokens[(k + 2).min(l.tokens.len())..].iter().map(|t| t.text.clone()).collect();
            if vals.is_empty() {
                return Err(PlanError::at(l.line, l.end_col, "at least one value after 'anyof'"));
            }
            if numeric {
                for j in k + 2..l.tokens.len() {
                    number(l, j, ty, "a value of the selection")?;
                }
            }
            Domain::Select(vals)
        }
        other => {
            return Err(PlanError::found(l.line, dt.col, "a domain: default, range, random or select", other))
        }
    };
    Ok(Parameter { name: name.text.clone(), label, ty, domain, line: l.line })
}

fn count(l: &Line, k: usize) -> Result<u64, PlanError> {
    let t = word(l, k, "a number of points")?;
    t.text
        .parse::<u64>()
        .ok()
        .filter(|&n| n >= 1)
        .ok_or_else(|| PlanError::found(l.line, t.col, "a whole number of points, at least 1", &t.text))
}

fn file_ref(t: &Token) -> FileRef {
    if let Some(p) = t.text.strip_prefix("node:") {
        FileRef { loc: Loc::Node, path: p.to_string() }
    } else if let Some(p) = t.text.strip_prefix("root:") {
        FileRef { loc: Loc::Root, path: p.to_string() }
    } else {
        FileRef { loc: Loc::Root, path: t.text.clone() }
    }
}

fn parse_command(l: &Line) -> Result<Command, PlanError> {
    let c = &l.tokens[0];
    let rest = || l.tokens[1..].iter().map(|t| t.text.clone()).collect::<Vec<_>>();
    Ok(match c.text.as_str() {
        "onerror" => {
            let t = word(l, 1, "'fail' or 'ignore'")?;
            let ignore = match t.text.as_str() {
                "fail" => false,
                "ignore" => true,
                other => return Err(PlanError::found(l.line, t.col, "'fail' or 'ignore'", other)),
            };
            end(l, 2)?;
            Command::OnError { ignore }
        }
        "redirect" => {
            let t = word(l, 1, "'stdout' or 'stderr'")?;
            let stream = match t.text.as_str() {
                "stdout" => Stream::Stdout,
                "stderr" => Stream::Stderr,
                other => return Err(PlanError::found(l.line, t.col, "'stdout' or 'stderr'", other)),
            };
            let mut k = 2;
            let next = word(l, k, "'to', 'append' or 'off'")?;
            if next.text == "off" {
                end(l, 3)?;
                return Ok(Command::Redirect { stream, append: false, target: None });
            }
            let append = next.text == "append";
            if append {
                k += 1;
            }
            keyword(l, k, "to")?;
            let f = word(l, k + 1, "a file name")?;
            end(l, k + 2)?;
            Command::Redirect { stream, append, target: Some(f.text.clone()) }
        }
        "copy" => {
            let a = word(l, 1, "a source file")?;
            let b = word(l, 2, "a destination file")?;
            end(l, 3)?;
            Command::Copy { from: file_ref(a), to: file_ref(b) }
        }
        "exec" | "node:execute" | "lexec" | "lpexec" => {
            word(l, 1, "a program to run")?;
            let kind = match c.text.as_str() {
                "lexec" => ExecKind::Lexec,
                "lpexec" => ExecKind::Lpexec,
                _ => ExecKind::Exec,
            };
            Command::Exec { kind, args: rest() }
        }
        "shexec" => {
            word(l, 1, "a shell command")?;
            Command::Exec { kind: ExecKind::Shexec, args: vec![rest().join(" ")] }
        }
        "substitute" => {
            let a = word(l, 1, "a template file")?;
            let b = word(l, 2, "an output file")?;
            end(l, 3)?;
            Command::Substitute { input: a.text.clone(), output: b.text.clone() }
        }
        other => {
            return Err(PlanError::found(
                l.line,
                c.col,
                "a command: onerror, redirect, copy, exec, shexec, lexec, lpexec, node:execute, substitute or endtask",
                other,
            ))
        }
    })
}

/// Every `$name` in a task must name a parameter or a built-in: caught now, not mid-sweep.
fn check_vars(plan: &Plan, lines: &[Line]) -> Result<(), PlanError> {
    let known = |n: &str| -> Option<String> {
        (BUILTIN_VARS.contains(&n) || plan.parameters.iter().any(|p| p.name == n)).then(String::new)
    };
    for l in lines {
        if l.tokens[0].text == "parameter" {
            continue;
        }
        for t in &l.tokens {
            if let Err((off, name)) = substitute(&t.text, &known) {
                let col = t.col + t.text[..off].chars().count() + usize::from(t.kind == TokKind::Str);
                return Err(PlanError::found(
                    l.line,
                    col,
                    "a declared parameter or jobname, nimrod_jobindex, OS",
                    &format!("${name}"),
                ));
            }
        }
    }
    Ok(())
}
