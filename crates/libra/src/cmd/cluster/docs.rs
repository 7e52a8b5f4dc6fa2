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
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, &name, out, n)?;
    }
    Ok(())
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
