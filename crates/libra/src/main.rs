//! `libra`: the one binary in front of the scheduler core, the simulator, the broker and the
//! running cluster. Each command lives in its own module under `cmd/`.

mod cmd;
mod cpu;
mod logging;
mod output;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

/// Libra: an economy-driven resource manager.
///
/// Users submit jobs with a runtime estimate, a deadline and a budget; the cluster admits a job
/// only if it can keep every promise it has made, prices it by supply and demand, enforces CPU
/// shares so that admitted jobs meet their deadlines, and never charges above the budget.
#[derive(Debug, Parser)]
#[command(name = "libra", version, about, long_about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    #[command(flatten)]
    pub global: Global,
}

/// The options every command takes.
#[derive(Debug, Args)]
pub struct Global {
    /// How log lines are written: text, or json (one object per line, with the job's id as a
    /// field on every line about a job). Beats log_format in a configuration file.
    #[arg(long, global = true, env = "LIBRA_LOG_FORMAT", value_parser = clap::builder::ValueParser::new(|s: &str| s.parse::<libra_server::config::LogFormat>()))]
    pub log_format: Option<libra_server::config::LogFormat>,
}

/// The command line, parsed. Building clap's whole tree (every command's arguments, some 680
/// KiB of heap and 170 page faults) took a quarter to a third of a short command such as `libra
/// status`, so a command line that names a command first and asks for neither help nor the
/// version is parsed against that command alone (`one_command`). Anything else, or a command
/// line that parse refuses, goes through the whole tree: help, the version and every error are
/// clap's usual ones.
fn parse() -> Cli {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    parse_one(&args).unwrap_or_else(|| {
        let m = whole_tree().get_matches_from(&args);
        Cli::from_arg_matches(&m).unwrap_or_else(|e| e.exit())
    })
}

/// The whole tree as the command line meets it: every command says its version as `libra X`
/// (`libra burn -V` is the one binary's version, not a program called `libra-burn`, clap's
/// default name for a subcommand). Man pages keep clap's names (`command_tree`).
fn whole_tree() -> clap::Command {
    fn named_libra(c: clap::Command) -> clap::Command {
        c.display_name("libra").mut_subcommands(named_libra)
    }
    hyphen_values(Cli::command().mut_subcommands(named_libra))
}

/// The options whose one value is a number, a duration, a time, a size or an amount, which take
/// a value that starts with a hyphen too: `--budget -3` and `-d -5m` reach the option's own
/// check, which names the field and what is accepted, instead of clap's "unexpected argument
/// '-3'" with a tip (`-- -3`) that would make it the command. Only these: such an option given
/// no value takes the next flag (`--deadline --budget 80`), which its own check refuses in
/// turn; an option of free text (`-J`, `-o`, `--account`) would take it silently, and the words
/// after it would become the job's command.
const NUMERIC_OPTIONS: &[&str] = &[
    "estimate",
    "deadline",
    "budget",
    "time_limit",
    "time",
    "mem",
    "mem_per_cpu",
    "cpus_per_task",
    "procs",
    "cpus",
    "mem_mb",
    "scratch_mb",
    "scratch_ahead",
    "tmp_mb",
    "max_tasks",
    "period",
    // Times and durations: `--end -3d`, `--since -2d` reach `parse_instant`'s own error.
    "start",
    "end",
    "since",
    "until",
    "starttime",
    "endtime",
    "duration",
];

/// Whether option `a` takes a number by its parser's type (every count, rate and coefficient:
/// `libra sim run --nodes -3`, `--alpha -1`), beside the ones `NUMERIC_OPTIONS` names, whose
/// parsers are the project's own (a deadline, a size).
fn parses_a_number(a: &clap::Arg) -> bool {
    use std::any::TypeId;
    let t = a.get_value_parser().type_id();
    [
        TypeId::of::<f64>(),
        TypeId::of::<f32>(),
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
        TypeId::of::<i32>(),
        TypeId::of::<i64>(),
        TypeId::of::<libra_core::Money>(),
    ]
    .into_iter()
    .any(|n| t == n)
}

fn hyphen_values(c: clap::Command) -> clap::Command {
    let numeric = |a: &clap::Arg| {
        !a.is_positional()
            && a.get_action().takes_values()
            && a.get_num_args().is_none_or(|n| n.min_values() == 1 && n.max_values() == 1)
            && (NUMERIC_OPTIONS.contains(&a.get_id().as_str()) || parses_a_number(a))
    };
    let ids: Vec<clap::Id> = c.get_arguments().filter(|a| numeric(a)).map(|a| a.get_id().clone()).collect();
    let c = ids.iter().fold(c, |c, id| c.mut_arg(id, |a| a.allow_hyphen_values(true)));
    c.mut_subcommands(hyphen_values)
}

fn parse_one(args: &[std::ffi::OsString]) -> Option<Cli> {
    let name = args.get(1)?.to_str()?;
    // A word that asks for help or the version anywhere (even in a job's own command line,
    // where it is harmless to take the long way).
    let asks = |a: &std::ffi::OsString| {
        matches!(a.to_str(), Some("-h" | "--help" | "help" | "-V" | "--version"))
            || a.to_str()
                .is_some_and(|a| a.starts_with('-') && !a.starts_with("--") && a.contains(['h', 'V']))
    };
    if args[1..].iter().any(asks) {
        return None;
    }
    let m = one_command(name)?.try_get_matches_from(args).ok()?;
    Cli::from_arg_matches(&m).ok()
}

/// `libra` with the global options and the one command `name` (None for a name that is not a
/// command's).
fn one_command(name: &str) -> Option<clap::Command> {
    let top: [(&'static str, cmd::cluster::AddArgs); 2] =
        [("sim", cmd::sim::SimArgs::augment_args), ("sweep", cmd::sweep::SweepArgs::augment_args)];
    let &(name, add) = top.iter().chain(cmd::cluster::COMMANDS).find(|(n, _)| *n == name)?;
    let top = clap::Command::new("libra").version(env!("CARGO_PKG_VERSION")).propagate_version(true);
    Some(hyphen_values(Global::augment_args(top).subcommand(add(clap::Command::new(name)))))
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Replay workloads through the scheduling policies (simulator, experiments, benchmarks).
    Sim(cmd::sim::SimArgs),
    /// Run parameter sweeps under a deadline and a budget (the Nimrod/G broker).
    Sweep(cmd::sweep::SweepArgs),
    #[command(flatten)]
    Cluster(Box<cmd::cluster::ClusterCommand>),
}

impl Command {
    fn configures_logging(&self) -> bool {
        matches!(self, Command::Cluster(c) if c.configures_logging())
    }

    /// Whether the command serves or runs work (a server, a node agent, a sweep's engine) rather
    /// than only printing: such a command keeps SIGPIPE ignored (`cmd::quiet_on_closed_stdout`).
    fn serves(&self) -> bool {
        match self {
            Command::Sim(_) => false,
            Command::Sweep(a) => a.runs_engine(),
            Command::Cluster(c) => c.serves(),
        }
    }
}

fn main() -> std::process::ExitCode {
    let cli = parse();
    logging::set_flag_format(cli.global.log_format);
    // The server and the node agent start logging once their configuration is read (its
    // log_level and log_format); everything else logs warnings now.
    if !cli.command.configures_logging() {
        let _ = logging::init("warn", cli.global.log_format.unwrap_or_default());
    }
    if !cli.command.serves() {
        cmd::quiet_on_closed_stdout();
    }
    let result = match cli.command {
        Command::Sim(args) => cmd::sim::run(args),
        Command::Sweep(args) => cmd::sweep::run(args),
        Command::Cluster(c) => cmd::cluster::run(*c),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", output::error_line(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// The full command tree, for man pages and shell completions.
pub fn command_tree() -> clap::Command {
    Cli::command()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    /// Every argument of `c` and of its subcommands, as clap describes them once built. A
    /// global option's place in help (`disp_ord`) depends on what else the parent holds, and help
    /// always comes from the whole tree: it is left out.
    fn described(c: &clap::Command) -> Vec<String> {
        let describe = |a: &clap::Arg| {
            let text = format!("{}: {a:?}", c.get_name());
            match (a.is_global_set(), text.find("disp_ord: "), text.find(", val_names")) {
                (true, Some(from), Some(to)) => format!("{}{}", &text[..from], &text[to..]),
                _ => text,
            }
        };
        // Help's own flag says whether there is more with --help (a long about): help is the
        // whole tree's.
        let mut out: Vec<String> = c.get_arguments().filter(|a| a.get_id() != "help").map(describe).collect();
        for s in c.get_subcommands() {
            out.extend(described(s));
        }
        out
    }

    #[test]
    fn each_command_alone_has_the_arguments_it_has_in_the_whole_tree() {
        let mut tree = whole_tree();
        tree.build();
        let mut seen = 0;
        for full in tree.get_subcommands().filter(|s| s.get_name() != "help") {
            let name = full.get_name();
            let mut one =
                one_command(name).unwrap_or_else(|| panic!("`{name}` is not in the table of commands"));
            one.build();
            let alone = one.find_subcommand(name).unwrap();
            let (a, f) = (described(alone), described(full));
            let first = a.iter().zip(&f).position(|(a, f)| a != f);
            assert!(
                a.len() == f.len() && first.is_none(),
                "{name}: {} arguments alone, {} in the tree; first difference:\n{:?}\n{:?}",
                a.len(),
                f.len(),
                first.map(|i| &a[i]),
                first.map(|i| &f[i])
            );
            seen += 1;
        }
        assert!(seen >= 27, "{seen} commands");
        assert!(one_command("no-such-command").is_none());
    }

    fn words(line: &str) -> Vec<OsString> {
        std::iter::once("libra").chain(line.split_whitespace()).map(OsString::from).collect()
    }

    #[test]
    fn a_command_line_parses_the_same_alone_or_in_the_tree_and_help_takes_the_tree() {
        for line in [
            "submit --estimate 5s --deadline 1m --budget 50 -n 2 -- libra burn --cpu-seconds 5",
            "status 12 --json",
            "--log-format json status",
            "status --log-format json",
            "server --listen 127.0.0.1:0 --period 2",
            "admin nodes --json",
            "sim run --trace t.swf --policy libra",
            "sweep check plan.pln",
            "history --state COMPLETED --format JobID,State",
            "job-keeper --record d -- sleep 1",
        ] {
            let args = words(line);
            let tree = format!("{:?}", Cli::try_parse_from(&args).unwrap());
            match parse_one(&args) {
                Some(one) => assert_eq!(format!("{one:?}"), tree, "{line}"),
                // Only a command line that does not start with a command takes the long way.
                None => assert!(line.starts_with('-'), "{line}"),
            }
        }
        // Help, the version and errors come from the whole tree.
        for line in [
            "submit --help",
            "status -h",
            "admin help nodes",
            "--version",
            "status -V",
            "status --no-such-flag",
        ] {
            assert!(parse_one(&words(line)).is_none(), "{line}");
        }
    }

    /// An option's value may start with a hyphen, so the option's own check names what is
    /// wrong with it; an unknown option is still an error, never a job's command; an option whose
    /// value is optional does not swallow the next flag.
    #[test]
    fn a_hyphen_value_reaches_its_option_and_an_unknown_option_is_refused() {
        let parsed = |line: &str| {
            let args = words(line);
            let tree =
                whole_tree().try_get_matches_from(&args).map(|m| format!("{:?}", Cli::from_arg_matches(&m)));
            let one = parse_one(&args).map(|c| format!("{:?}", Ok::<Cli, clap::Error>(c)));
            (tree, one)
        };
        for line in [
            "submit --estimate 1s -d -5m --budget -3 -- /bin/true",
            "update 4 --budget -3",
            "admin account allocate physics 50 --start -3d --end -3m",
            "admin usage --since -3d --until -3m",
            "history --starttime -3d --endtime -3m",
        ] {
            let (tree, one) = parsed(line);
            let tree = tree.unwrap_or_else(|e| panic!("{line}: {e}"));
            assert!(tree.contains("\"-3"), "{line}: {tree}");
            assert_eq!(one.as_deref(), Some(tree.as_str()), "{line}");
        }
        // An option whose parser takes a number, anywhere: the value reaches it (`alpha: -1.0`,
        // then refused by the run's own check), or its parser names the option.
        let (tree, _) = parsed("sim run --alpha -1");
        assert!(tree.as_ref().is_ok_and(|t| t.contains("alpha: -1.0")), "{tree:?}");
        for line in ["sim run --nodes -3", "sweep run p -r r --deadline 1m --budget 1 --max-retries -1"] {
            let e = parsed(line).0.expect_err(line);
            assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation, "{line}: {e}");
            assert!(e.to_string().contains("'-"), "{line}: {e}");
        }
        // A text option given no value does not take the next flag: the words after it would
        // become the job's command.
        for line in [
            "submit --estimte 1s -- /bin/true",
            "submit --begin now -- /bin/true",
            "submit -o -e err.txt -- /bin/true",
            "submit -J -- /bin/true",
            "submit --account --mem 1G -- /bin/true",
        ] {
            let (tree, one) = parsed(line);
            let e = tree.expect_err(line);
            use clap::error::ErrorKind::{InvalidValue, UnknownArgument};
            assert!(matches!(e.kind(), UnknownArgument | InvalidValue), "{line}: {:?}", e.kind());
            assert!(one.is_none(), "{line}");
        }
    }

    /// `-V` names the one binary at every depth (`libra burn -V`, `libra admin nodes -V`), and
    /// the tree the command line meets parses as the derived one does.
    #[test]
    fn every_command_gives_the_binarys_version_under_its_name() {
        fn paths(c: &clap::Command, at: Vec<String>, out: &mut Vec<Vec<String>>) {
            for s in c.get_subcommands().filter(|s| s.get_name() != "help") {
                let mut p = at.clone();
                p.push(s.get_name().to_string());
                paths(s, p.clone(), out);
                out.push(p);
            }
        }
        let mut all = Vec::new();
        paths(&Cli::command(), Vec::new(), &mut all);
        assert!(all.len() >= 40, "{} commands", all.len());
        let want = format!("libra {}\n", env!("CARGO_PKG_VERSION"));
        for p in std::iter::once(Vec::new()).chain(all) {
            let line = format!("{} -V", p.join(" "));
            let e = whole_tree().try_get_matches_from(words(&line)).expect_err(&line);
            assert_eq!(e.kind(), clap::error::ErrorKind::DisplayVersion, "{line}");
            assert_eq!(e.to_string(), want, "{line}");
        }
        let line = "submit --estimate 5s --deadline 1m --budget 50 -- true";
        let m = whole_tree().try_get_matches_from(words(line)).unwrap();
        assert_eq!(
            format!("{:?}", Cli::from_arg_matches(&m).unwrap()),
            format!("{:?}", Cli::try_parse_from(words(line)).unwrap())
        );
    }
}
