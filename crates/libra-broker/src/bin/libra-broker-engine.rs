//! Runs (or resumes) one experiment of a broker database: `libra-broker-engine DB EXP`.
//! The `libra sweep` command is the front end; this small binary lets the crate's own tests
//! kill an engine with SIGKILL mid-sweep.

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(db), Some(exp)) = (args.get(1), args.get(2).and_then(|e| e.parse::<i64>().ok())) else {
        eprintln!("usage: libra-broker-engine DB EXPERIMENT_ID");
        return std::process::ExitCode::from(2);
    };
    match libra_broker::engine::run(std::path::Path::new(db), exp, Default::default()) {
        Ok(state) => {
            println!("{state}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
