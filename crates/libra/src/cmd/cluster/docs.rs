//! `libra man` and `libra completions`, generated from the command definitions.

use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Directory to write the pages into (libra.1, libra-submit.1, ...). Install with e.g.
    /// `libra man --out ~/.local/share/man/man1`.
    #[arg(long, default_value = "man")]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish, powershell. Install e.g. with
    /// `libra completions bash > ~/.local/share/bash-completion/completions/libra`.
    pub shell: clap_complete::Shell,
}

fn write_pages(cmd: &clap::Command, prefix: &str, out: &std::path::Path, n: &mut usize) -> Result<()> {
    let name =
        if prefix.is_empty() { cmd.get_name().to_string() } else { format!("{prefix}-{}", cmd.get_name()) };
    // clap wants a static name; the process ends right after writing the pages.
    let page = cmd.clone().name(&*Box::leak(name.clone().into_boxed_str()));
    let mut buf = Vec::new();
    clap_mangen::Man::new(page).render(&mut buf)?;
    let path = out.join(format!("{name}.1"));
    std::fs::write(&path, buf).with_context(|| format!("writing {}", path.display()))?;
    *n += 1;
    for sub in documented(cmd) {
        write_pages(sub, &name, out, n)?;
    }
    Ok(())
}

/// The subcommands that get a page: not the hidden ones, nor the `help` subcommand clap adds to
/// every command that has subcommands (it would only repeat the parent's page, ~90 times over).
fn documented(cmd: &clap::Command) -> impl Iterator<Item = &clap::Command> {
    cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help")
}

pub fn man(a: ManArgs) -> Result<()> {
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let mut cmd = crate::command_tree();
    cmd.build();
    let mut n = 0;
    write_pages(&cmd, "", &a.out, &mut n)?;
    println!("wrote {n} man pages to {}", a.out.display());
    Ok(())
}

pub fn completions(a: CompletionsArgs) -> Result<()> {
    let mut cmd = crate::command_tree();
    clap_complete::generate(a.shell, &mut cmd, "libra", &mut std::io::stdout());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command's page name, walking the tree as a reader would (`libra-sweep-run`).
    fn real_commands(cmd: &clap::Command, prefix: &str, out: &mut Vec<String>) {
        let name = if prefix.is_empty() {
            cmd.get_name().to_string()
        } else {
            format!("{prefix}-{}", cmd.get_name())
        };
        out.push(name.clone());
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
            real_commands(sub, &name, out);
        }
    }

    #[test]
    fn one_page_per_real_command_and_none_for_help() {
        let dir = std::env::temp_dir().join(format!("libra-man-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        man(ManArgs { out: dir.clone() }).unwrap();
        let mut written: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().trim_end_matches(".1").to_string())
            .collect();
        written.sort();
        assert!(!written.iter().any(|p| p == "libra-help" || p.ends_with("-help")), "{written:?}");
        let mut want = Vec::new();
        // The tree as users see it: built (so clap's own additions are there to be skipped), and
        // without clap's auto help.
        let mut tree = crate::command_tree();
        tree.build();
        real_commands(&tree, "", &mut want);
        want.sort();
        assert_eq!(written, want);
        for page in
            ["libra", "libra-submit", "libra-sweep-set-deadline", "libra-admin-user-add", "libra-sim-run"]
        {
            assert!(written.iter().any(|w| w == page), "no page {page}: {written:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
