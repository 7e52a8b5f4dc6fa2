use super::*;
use std::path::Path;

const FIG_17_11: &str = r#"
#Parameters Declaration
parameter angle_degree integer range from 1 to 165 step 1;
parameter time_base_value integer default 5;

#Task Definition
task main
    #Copy necessary executables depending on node type
    copy calc.$OS node:calc
    #Execute program with parameter values on remote node
    node:execute ./calc $angle_degree $time_base_value
    #Copy results file to use home node with jobname as extension
    copy node:output ./output.$jobname
endtask
"#;

#[test]
fn figure_17_11_parses_and_makes_165_jobs() {
    let p = parse(FIG_17_11).unwrap();
    assert_eq!(p.parameters.len(), 2);
    assert_eq!(p.main.len(), 3);
    assert_eq!(
        p.main[0].command,
        Command::Copy {
            from: FileRef { loc: Loc::Root, path: "calc.$OS".into() },
            to: FileRef { loc: Loc::Node, path: "calc".into() }
        }
    );
    let j = expand(&p, Path::new("."), 0).unwrap();
    assert_eq!(j.total, 165);
    assert_eq!(j.job(0), vec![("angle_degree".into(), "1".into()), ("time_base_value".into(), "5".into())]);
    assert_eq!(j.job(164)[0].1, "165");
}

#[test]
fn nimrodg_forms_parse() {
    let src = r#"
parameter x label "X value" float range from 0 to 1 points 5
parameter mode text select anyof "fast" "slow"
parameter seed integer random from 1 to 100 points 3
task nodestart
    exec mkdir -p cache
endtask
task main
    onerror ignore
    redirect stdout append to out.txt
    redirect stderr off
    substitute in.tmpl node:in.txt
    shexec "echo $x ${mode} > result.${nimrod_jobindex}"
    lpexec python3 sim.py $seed
    lexec /bin/true
endtask
"#;
    let p = parse(src).unwrap();
    assert_eq!(p.parameters[0].label.as_deref(), Some("X value"));
    assert_eq!(p.nodestart.len(), 1);
    assert_eq!(p.main.len(), 7);
    let j = expand(&p, Path::new("."), 42).unwrap();
    assert_eq!(j.total, 5 * 2 * 3);
    assert_eq!(j.values[0], vec!["0", "0.25", "0.5", "0.75", "1"]);
    // Seeded: the same seed gives the same values, another seed (almost surely) others.
    let again = expand(&p, Path::new("."), 42).unwrap();
    assert_eq!(j.values[2], again.values[2]);
    assert!(j.values[2].iter().all(|v| (1..=100).contains(&v.parse::<i64>().unwrap())));
}

fn err(src: &str) -> PlanError {
    parse(src).unwrap_err()
}

#[test]
fn broken_plans_say_where_and_what() {
    let e = err("parameter x integer range from 1 to\ntask main\nexec true\nendtask\n");
    assert_eq!((e.line, e.col, e.expected.as_str()), (1, 36, "the end of the range"));
    let e = err("parameter x integer rnage from 1 to 3\ntask main\nexec true\nendtask");
    assert_eq!((e.line, e.col), (1, 21));
    assert!(e.to_string().contains("found 'rnage'"), "{e}");
    let e = err("parameter x float range from 1 to 2 step 0.5\ntask main\n  exec echo $y\nendtask");
    assert_eq!((e.line, e.col), (3, 13), "{e}");
    let e = err("task main\n  exec true\n");
    assert!(e.expected.contains("endtask"), "{e}");
    let e = err("task main\n  frobnicate\nendtask");
    assert_eq!((e.line, e.col), (2, 3));
    let e = err("parameter x integer default 1.5\ntask main\nexec true\nendtask");
    assert_eq!((e.line, e.col), (1, 29));
    let e = err("parameter x integer range from 5 to 1 step 1\ntask main\nexec true\nendtask");
    assert!(e.expected.contains("towards the end"), "{e}");
    let e = err("task main\n  shexec \"unterminated\nendtask");
    assert_eq!((e.line, e.col), (2, 10));
    let e = err("parameter x integer default 1\n");
    assert!(e.expected.contains("task main"), "{e}");
    let e =
        err("parameter x integer default 1\nparameter x integer default 2\ntask main\nexec true\nendtask");
    assert_eq!(e.line, 2);
}

#[test]
fn substitution_forms() {
    let vars = |n: &str| match n {
        "a" => Some("1".to_string()),
        "jobname" => Some("7".to_string()),
        _ => None,
    };
    assert_eq!(substitute("x$a-${a}y$$ $jobname.out $", &vars), Ok("x1-1y$ 7.out $".into()));
    assert_eq!(substitute("${b}", &vars), Err((0, "b".into())));
}

#[test]
fn files_parameters_glob_relative_to_the_root() {
    let d = tempfile::tempdir().unwrap();
    for f in ["a.dat", "b.dat", "c.txt"] {
        std::fs::write(d.path().join(f), "").unwrap();
    }
    let p = parse("parameter f files select anyof \"*.dat\"\ntask main\ncopy $f node:in\nendtask").unwrap();
    let j = expand(&p, d.path(), 0).unwrap();
    assert_eq!(j.values[0], vec!["a.dat", "b.dat"]);
    let p = parse("parameter f files select anyof \"*.none\"\ntask main\nexec true\nendtask").unwrap();
    assert!(expand(&p, d.path(), 0).is_err());
}
