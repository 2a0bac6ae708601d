//! servers.toml parsed and validated: what each key accepts, and the errors it names.

use super::*;

fn env(name: &str) -> Option<String> {
    match name {
        "TOKEN" => Some("s3cret".into()),
        "HOME_DIR" => Some("/home/me".into()),
        "HOME" => Some("/home/me/".into()),
        _ => None,
    }
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, "servers.toml", Path::new("/cfg"), &env)
}

/// Each case: a config and the exact error it must give.
#[test]
fn config_errors_name_file_section_and_key() {
    let cases: &[(&str, &str)] = &[
        (
            "[proxy]\nseperator = \"__\"",
            "servers.toml: [proxy]: key 'seperator': unknown key (did you mean 'separator'?)",
        ),
        (
            "[servers.a]\ncomand = \"x\"",
            "servers.toml: [servers.a]: key 'comand': unknown key (did you mean 'command'?)",
        ),
        (
            "[servers.a]\ncommand = \"x\"\nurl = \"http://h\"",
            "servers.toml: [servers.a]: 'command', 'url' and 'builtin' exclude each other: set only one",
        ),
        (
            "[servers.a]\nargs = []",
            "servers.toml: [servers.a]: needs one of 'command', 'url' or 'builtin'",
        ),
        (
            "[servers.a]\ncommand = \"x\"\ninclude = [\"read_[\"]",
            "servers.toml: [servers.a]: key 'include': bad glob 'read_[': unclosed character class; missing ']'",
        ),
        (
            "[servers.a]\ncommand = \"x\"\nenv = { KEY = \"${MIS SING}\" }",
            "servers.toml: [servers.a]: key 'env.KEY': '${MIS SING}' is not a valid variable name",
        ),
        (
            "[http]\ntokens = [\"${MISSING}\"]",
            "servers.toml: [http]: key 'tokens': environment variable 'MISSING' is not set (write $$ for a literal $)",
        ),
        (
            "[proxy]\naudit_log = \"${MISSING}/audit.jsonl\"",
            "servers.toml: [proxy]: key 'audit_log': environment variable 'MISSING' is not set (write $$ for a literal $)",
        ),
        (
            "[proxy]\nenv_inherit = [\"AWS_[\"]",
            "servers.toml: [proxy]: key 'env_inherit': bad glob 'AWS_[': unclosed character class; missing ']'",
        ),
        (
            "[proxy]\nenv_inherit = \"AWS_*\"",
            "servers.toml: [proxy]: key 'env_inherit': expected an array of strings, found string",
        ),
        (
            "[http]\nmax_connections = 99999999999",
            "servers.toml: [http]: key 'max_connections': must be at most 1000000",
        ),
        (
            "[servers.a]\nurl = \"ftp://h\"",
            "servers.toml: [servers.a]: key 'url': must start with http:// or https://",
        ),
        (
            "[servers.a]\nbuiltin = \"nope\"",
            "servers.toml: [servers.a]: key 'builtin': unknown built-in server 'nope' (one of: metrics, weather, files, chaos, hostile, conformance)",
        ),
        (
            "[servers.a]\ncommand = 5",
            "servers.toml: [servers.a]: key 'command': expected a string, found integer",
        ),
        (
            "[servers.a]\ncommand = \"x\"\nenabled = \"yes\"",
            "servers.toml: [servers.a]: key 'enabled': expected true or false",
        ),
        (
            "[servers.a]\ncommand = \"x\"\ncall_timeout_ms = 0",
            "servers.toml: [servers.a]: key 'call_timeout_ms': expected a positive integer, found 0",
        ),
        (
            "[servers.a]\nurl = \"http://h\"\nargs = []",
            "servers.toml: [servers.a]: key 'args': does not apply to this kind of server",
        ),
        (
            "[servers.a]\ncommand = \"x\"\ntiers = { \"read_*\" = \"safe\" }",
            "servers.toml: [servers.a]: key 'tiers.read_*': unknown tier 'safe' (one of: read, write, destructive)",
        ),
        (
            "[servers.a]\ncommand = \"x\"\ntiers = { \"[\" = \"read\" }",
            "servers.toml: [servers.a]: key 'tiers.[': bad glob: unclosed character class; missing ']'",
        ),
        (
            "[servers.a]\ncommand = \"x\"\ntrust_annotations = \"yes\"",
            "servers.toml: [servers.a]: key 'trust_annotations': expected true or false",
        ),
        (
            "[policy]\ndeny = [\"[\"]",
            "servers.toml: [policy]: key 'deny': bad glob '[': unclosed character class; missing ']'",
        ),
        (
            "[policy]\nconfirm = \"always\"",
            "servers.toml: [policy]: key 'confirm': unknown value 'always' (one of: write, destructive, none)",
        ),
        (
            "[policy]\ndenny = []",
            "servers.toml: [policy]: key 'denny': unknown key (did you mean 'deny'?)",
        ),
        (
            "[servers.a]\nbuiltin = \"chaos\"\nenv_inherit = [\"AWS_*\"]",
            "servers.toml: [servers.a]: key 'env_inherit': does not apply to this kind of server",
        ),
        (
            "[servers.a]\ncommand = \"x\"\nenv_inherit = \"AWS_*\"",
            "servers.toml: [servers.a]: key 'env_inherit': expected an array of strings, found string",
        ),
        (
            "[servers.\"a.b\"]\ncommand = \"x\"",
            "servers.toml: [servers.a.b]: a server name may use only A-Z a-z 0-9 _ -",
        ),
        (
            "[servers.a__b]\ncommand = \"x\"",
            "servers.toml: [servers.a__b]: a server name must not contain the separator '__'",
        ),
        (
            "[proxy]\nseparator = \".\"",
            "servers.toml: [proxy]: key 'separator': must be non-empty and use only A-Z a-z 0-9 _ -",
        ),
        (
            "[http]\nrate_limit = \"10/day\"",
            "servers.toml: [http]: key 'rate_limit': '10/day' is not a rate: write N/s, N/min or N/h (N at least 1), e.g. \"120/min\"",
        ),
        (
            "[telemetry]\notlp_endpoint = \"collector:4317\"",
            "servers.toml: [telemetry]: key 'otlp_endpoint': must be an http or https URL, e.g. \"http://collector:4318\"",
        ),
        (
            "[state]\nstore = \"postgres://u:pw@db\"",
            "servers.toml: [state]: key 'store': 'postgres:' is not a Redis URL's scheme (redis: or rediss: for TLS): write \"memory\" or a Redis URL such as \"redis://127.0.0.1:6379\"",
        ),
        (
            "[state]\nstore = \"redis://${NO_SUCH_VAR}@cache\"",
            "servers.toml: [state]: key 'store': environment variable 'NO_SUCH_VAR' is not set (write $$ for a literal $)",
        ),
        (
            "[http.auth]\nissuer = \"http://idp.example.com\"\naudience = \"https://pm.example.com/mcp\"",
            "servers.toml: [http.auth]: key 'issuer': must be an https URL (http only on a loopback address)",
        ),
        (
            "[http.auth]\nissuer = \"https://idp.example.com\"",
            "servers.toml: [http]: key 'auth': missing field `audience`",
        ),
        (
            "[[access]]\nwho = [\"team:x\"]\ntools = [\"*\"]",
            "servers.toml: [[access]] #1: key 'who': 'team:x' names no caller: write sub:ID, group:NAME, email:ADDR or \"*\"",
        ),
        (
            "[[access]]\nwho = [\"*\"]\ntools = [\"*\"]\n[[access]]\nwho = [\"*\"]",
            "servers.toml: [[access]] #2: missing field `tools`",
        ),
        (
            "[proxy]\nmax_concurrency = -1",
            "servers.toml: [proxy]: key 'max_concurrency': expected a positive integer, found -1",
        ),
        (
            "sever = 1",
            "servers.toml: top level: key 'sever': unknown key (did you mean 'servers'?)",
        ),
        (
            "[servers]\na = 1",
            "servers.toml: [servers]: key 'a': expected a table, found integer",
        ),
        (
            "[servers.a]\ncommand = \"${\"",
            "servers.toml: [servers.a]: key 'command': unclosed '${' in \"${\"",
        ),
    ];
    for (text, want) in cases {
        match parse(text) {
            Ok(_) => panic!("expected an error for {text:?}"),
            Err(e) => assert_eq!(e.to_string(), *want, "for {text:?}"),
        }
    }
}

#[test]
fn syntax_error_names_the_file_and_line() {
    let err = parse("[servers.a\ncommand = 1")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.starts_with("servers.toml: not valid TOML: "), "{err}");
    assert!(err.contains("line 1"), "{err}");
}

#[test]
fn full_config_parses() -> Result<(), ConfigError> {
    let config = parse(
        r#"
[proxy]
separator = "--"
call_timeout_ms = 1000
max_output_chars = 500
kept_runs = 5
kept_run_bytes = 1048576

[http]
max_connections = 8
header_timeout_ms = 2500

[servers.files]
command = "npx"
args = ["-y", "pkg", "${HOME_DIR}/x", "$$HOME", "costs $5"]
env = { API_KEY = "${TOKEN}" }
env_inherit = ["AWS_*", "GH_TOKEN"]
cwd = "work"
include = ["read_*", "write_file"]
exclude = ["read_secret*"]

[servers.remote]
url = "https://example.com/mcp"
headers = { Authorization = "Bearer ${TOKEN}" }
call_timeout_ms = 5

[servers.demo]
builtin = "metrics"
enabled = false
"#,
    )?;
    assert_eq!(config.proxy.separator, "--");
    assert_eq!(config.proxy.max_output_chars, 500);
    assert_eq!(
        (config.proxy.kept_runs, config.proxy.kept_run_bytes),
        (5, 1 << 20)
    );
    assert_eq!(config.http.max_connections, 8);
    assert_eq!(config.http.header_timeout, Duration::from_millis(2500));
    assert_eq!(
        config.http.max_requests,
        crate::config::DEFAULT_MAX_REQUESTS
    );
    assert_eq!(config.servers.len(), 3);
    let files = &config.servers[0];
    let Transport::Stdio {
        command,
        args,
        env,
        env_inherit,
        cwd,
    } = &files.transport
    else {
        panic!("files should be stdio");
    };
    assert_eq!(command, "npx");
    assert_eq!(args, &["-y", "pkg", "/home/me/x", "$HOME", "costs $5"]);
    assert_eq!(env.get("API_KEY").map(String::as_str), Some("s3cret"));
    let inherits = |name: &str| env_inherit.as_ref().is_some_and(|set| set.is_match(name));
    assert!(inherits("AWS_REGION") && inherits("GH_TOKEN") && !inherits("TOKEN"));
    assert_eq!(cwd.as_deref(), Some(Path::new("/cfg/work")));
    assert_eq!(files.call_timeout, Duration::from_millis(1000));
    assert!(files.keeps("read_file"));
    assert!(files.keeps("write_file"));
    assert!(!files.keeps("read_secret_key"));
    assert!(!files.keeps("delete_file"));
    let Transport::Http {
        url,
        headers,
        sign_in,
    } = &config.servers[1].transport
    else {
        panic!("remote should be http");
    };
    assert_eq!(url, "https://example.com/mcp");
    assert_eq!(
        headers.get("Authorization").map(String::as_str),
        Some("Bearer s3cret")
    );
    assert_eq!(sign_in, &crate::config::SignIn::Header);
    assert_eq!(config.servers[1].call_timeout, Duration::from_millis(5));
    assert!(!config.servers[2].enabled);
    assert_eq!(config.enabled_servers().count(), 2);
    Ok(())
}

#[test]
fn proxy_section_after_servers_still_sets_their_defaults() -> Result<(), ConfigError> {
    let config = parse("[servers.a]\ncommand = \"x\"\n[proxy]\ncall_timeout_ms = 7")?;
    assert_eq!(config.servers[0].call_timeout, Duration::from_millis(7));
    Ok(())
}

#[test]
fn the_repository_default_config_is_valid() -> Result<(), ConfigError> {
    let config = parse(DEFAULT_CONFIG)?;
    assert!(
        config
            .servers
            .iter()
            .all(|s| matches!(s.transport, Transport::Builtin { .. }))
    );
    assert!(config.servers.len() >= 4);
    Ok(())
}

/// Each case: the text, then what it expands to and the variables it names that are
/// unset, or the error.
#[test]
fn expand_vars_cases() {
    type Want<'a> = Result<(&'a str, &'a [&'a str]), &'a str>;
    let cases: &[(&str, Want)] = &[
        ("plain", Ok(("plain", &[]))),
        ("${TOKEN}", Ok(("s3cret", &[]))),
        ("a${TOKEN}b${TOKEN}", Ok(("as3cretbs3cret", &[]))),
        ("$5 and $HOME", Ok(("$5 and $HOME", &[]))),
        ("$${TOKEN}", Ok(("${TOKEN}", &[]))),
        ("end$", Ok(("end$", &[]))),
        ("${NOPE}", Ok(("", &["NOPE"]))),
        (
            "a${NOPE}b${TOKEN}${ALSO}${NOPE}",
            Ok(("abs3cret", &["NOPE", "ALSO"])),
        ),
        ("${a b}", Err("'${a b}' is not a valid variable name")),
        ("${NOPE}${", Err("unclosed '${' in \"${NOPE}${\"")),
    ];
    for (raw, want) in cases {
        let got = expand_vars(raw, &env);
        let got = got.as_ref().map(|e| (e.text.as_str(), e.unset.clone()));
        let want = want.map(|(text, unset)| (text, unset.iter().map(|n| n.to_string()).collect()));
        assert_eq!(got.map_err(String::as_str), want, "for {raw:?}");
    }
}

/// A server whose keys name unset variables is kept, unable to start, with every
/// variable and the keys that name it; the file's other servers are unaffected. Each case:
/// a server's section and why it cannot start (`None`: it can).
#[test]
fn a_server_needing_an_unset_variable_is_kept_unable_to_start() {
    let cases: &[(&str, Option<&str>)] = &[
        ("command = \"x\"\nenv = { KEY = \"${TOKEN}\" }", None),
        (
            "command = \"x\"\nenv = { NOTION_TOKEN = \"${NOTION_TOKEN}\" }",
            Some("NOTION_TOKEN (in `env`), which is not set"),
        ),
        (
            "command = \"${BIN}/srv\"\nargs = [\"${A}\", \"${BIN}\"]\ncwd = \"${A}\"\ninclude = [\"${G}*\"]",
            Some(
                "variables A (in `cwd`, `args`), BIN (in `command`, `args`) and G (in `include`), which are not set",
            ),
        ),
        (
            "url = \"${BASE}/mcp\"\nheaders = { Authorization = \"Bearer ${KEY}\" }",
            Some("variables KEY (in `headers`) and BASE (in `url`), which are not set"),
        ),
        (
            "builtin = \"files\"\ncwd = \"${ROOT}\"",
            Some("variable ROOT (in `cwd`), which is not set"),
        ),
        (
            "command = \"x\"\nenv_inherit = [\"${PREFIX}_*\"]",
            Some("PREFIX (in `env_inherit`)"),
        ),
    ];
    for (section, want) in cases {
        let text = format!("[servers.fine]\nbuiltin = \"metrics\"\n[servers.a]\n{section}\n");
        let config = parse(&text).unwrap_or_else(|e| panic!("{section}: {e}"));
        assert_eq!(config.servers[0].cannot_start(), None);
        let reason = config.servers[1].cannot_start();
        match (&reason, want) {
            (None, None) => {}
            (Some(reason), Some(want)) => assert!(reason.contains(want), "{section}: {reason}"),
            _ => panic!("{section}: {reason:?}"),
        }
    }
}

/// What a user reads (in `planmux check`, the logs and a call's error) for a server that
/// needs unset variables.
#[test]
fn the_unset_variable_texts() {
    let text = "[servers.notion]\ncommand = \"npx\"\nenv = { NOTION_TOKEN = \"${NOTION_TOKEN}\" }\n\
        [servers.two]\nurl = \"https://${HOST}/mcp\"\nheaders = { X-Key = \"${KEY}\" }\n";
    let config = parse(text).expect("valid");
    let reasons: Vec<String> = (config.servers.iter())
        .map(|s| format!("{}: {}", s.name, s.cannot_start().unwrap_or_default()))
        .collect();
    insta::assert_snapshot!("unset_variable_texts", reasons.join("\n"));
}

/// `[proxy] env_inherit` applies to every stdio server, beside the server's own.
#[test]
fn proxy_env_inherit_reaches_every_stdio_server() {
    let config = parse(
        "[proxy]\nenv_inherit = [\"CORP_*\"]\n[servers.a]\ncommand = \"x\"\n\
         [servers.b]\ncommand = \"y\"\nenv_inherit = [\"AWS_*\"]\n",
    )
    .expect("valid");
    let inherits = |server: usize, name: &str| match &config.servers[server].transport {
        Transport::Stdio { env_inherit, .. } => {
            env_inherit.as_ref().is_some_and(|set| set.is_match(name))
        }
        _ => false,
    };
    assert!(inherits(0, "CORP_CA") && !inherits(0, "AWS_REGION"));
    assert!(inherits(1, "CORP_CA") && inherits(1, "AWS_REGION") && !inherits(1, "TOKEN"));
}

#[test]
fn the_example_npm_config_is_valid() -> Result<(), ConfigError> {
    let text = include_str!("../../examples/servers-npm.toml");
    let home = |name: &str| (name == "HOME").then(|| "/home/me".to_string());
    let config = Config::parse(text, "servers-npm.toml", Path::new("/cfg"), &home)?;
    assert_eq!(config.servers.len(), 3);
    assert!(!config.servers[0].keeps("move_file"));
    Ok(())
}

#[test]
fn pipelines_are_read_parsed_and_checked_for_cycles() {
    let step = |tool: &str| format!("[[pipelines.{tool}.plan.steps]]\ntool = \"x\"\n");
    let calls =
        |name: &str, other: &str| format!("[[pipelines.{name}.plan.steps]]\ntool = \"{other}\"\n");
    let cases: Vec<(String, &str)> = vec![
        (
            "[pipelines.a]\nplan = 3".into(),
            "servers.toml: [pipelines.a]: key 'plan': expected a plan file (a string) or an inline plan (a table), found integer",
        ),
        (
            "[pipelines.a]\ndescription = \"x\"".into(),
            "servers.toml: [pipelines.a]: key 'plan': is missing: give the plan file",
        ),
        (
            "[pipelines.a]\nplan = \"nope.json\"".into(),
            "servers.toml: [pipelines.a]: key 'plan': cannot read /cfg/nope.json: No such file or directory (os error 2)",
        ),
        (
            "[pipelines.\"a b\"]\nplan = {}".into(),
            "servers.toml: [pipelines]: key 'a b': a pipeline name uses only A-Z a-z 0-9 _ -: it is the name of a tool",
        ),
        (
            step("execute_plan"),
            "servers.toml: [pipelines]: key 'execute_plan': 'execute_plan' is one of planmux's own tools; choose another name",
        ),
        (
            "[pipelines.a]\nplans = 1".into(),
            "servers.toml: [pipelines.a]: key 'plans': unknown key (did you mean 'plan'?)",
        ),
        (
            "[pipelines.a]\nplan = { steps = \"no\" }".into(),
            "servers.toml: [pipelines.a]: key 'plan': the plan in inline does not parse:\nsteps: expected an array of steps, found a string (\"no\")",
        ),
        (
            calls("a", "a"),
            "servers.toml: [pipelines.a]: the pipeline calls itself",
        ),
        (
            step("fs__read"),
            "servers.toml: [pipelines]: key 'fs__read': a pipeline name may not contain the separator '__': it would read as a server's tool",
        ),
        (
            "[pipelines.a]\nplan = { mode = \"lazy\", steps = [] }".into(),
            "servers.toml: [pipelines.a]: key 'plan': the plan in inline is lazy (mode lazy / dry_run), and a pipeline runs its plan: remove it",
        ),
        (
            format!("{}{}{}", calls("a", "b"), calls("b", "c"), calls("c", "a")),
            "servers.toml: [pipelines]: pipelines call each other in a cycle: a → b → c → a",
        ),
    ];
    for (text, expected) in cases {
        match parse(&text) {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(e) => assert_eq!(e.to_string(), expected, "{text}"),
        }
    }
    let config = parse(&format!(
        "{}{}[pipelines.b.input_schema]\ntype = \"object\"\n",
        calls("a", "b"),
        step("b")
    ))
    .expect("valid");
    let names: Vec<&str> = config.pipelines.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(
        config.pipelines[1].input_schema,
        Some(serde_json::json!({"type": "object"}))
    );
    assert_eq!(config.pipelines[0].source, "inline");
}

#[test]
fn a_leading_tilde_is_the_home_folder_in_paths() {
    let config = parse(
        "[proxy]\naudit_log = \"~/audit.jsonl\"\n[servers.a]\ncommand = \"~/bin/srv\"\nargs = [\"~\", \"~/x\", \"a~/b\", \"~other/x\"]\ncwd = \"~/work\"\n",
    )
    .expect("valid");
    let Transport::Stdio {
        command, args, cwd, ..
    } = &config.servers[0].transport
    else {
        panic!("stdio");
    };
    assert_eq!(command, "/home/me/bin/srv");
    assert_eq!(args, &["/home/me", "/home/me/x", "a~/b", "~other/x"]);
    assert_eq!(cwd.as_deref(), Some(Path::new("/home/me/work")));
    assert_eq!(
        config.proxy.audit_log.as_deref(),
        Some(Path::new("/home/me/audit.jsonl"))
    );
}

/// User info in a server's URL becomes Basic auth and would replace a configured
/// `Authorization` header: both at once is refused, naming why. Either alone is fine.
#[test]
fn url_user_info_and_an_authorization_header_exclude_each_other() {
    let both = "[servers.r]\nurl = \"https://me:pw@example.com/mcp\"\nheaders = { authorization = \"Bearer x\" }\n";
    let err = parse(both).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        err.contains("[servers.r]") && err.contains("headers") && err.contains("user info"),
        "{err}"
    );
    let header = "[servers.r]\nurl = \"https://example.com/mcp?a=b@c\"\nheaders = { Authorization = \"Bearer x\" }\n";
    assert!(parse(header).is_ok());
    assert!(parse("[servers.r]\nurl = \"https://me:pw@example.com/mcp\"\n").is_ok());
}

/// What a user reads for each broken config, every problem at once, one to a line. The
/// last file has many: a section that refused a key is not checked further (`[servers.a]`,
/// `[proxy]`), the others are, and nothing is checked against a refused separator.
#[test]
fn config_error_texts() {
    let configs = [
        "[servers.files]\ncomand = \"npx\"",
        "[servers.a]\ncommand = \"x\"\nenv = { KEY = 5, OK = \"y\", ALSO = true }",
        "[servers.a]\ncommand = [\"x\"]",
        "[servers.a]\nurl = \"http://h\"\nargs = []\nenv = {}\ncwd = \"c\"",
        "[servers.a]\ncommand = \"${A}\"\nargs = [\"${B}\"]\ninclude = [\"[\", \"a{\", \"ok\"]",
        "[proxy]\nsurface = \"some\"\n[http]\ntokens = [\"short\"]\nmax_requests = 0",
        "[proxy]\ntiemout = 1",
        "proxy = 5\npipelines = []",
        "[[pipelines.a.plan.steps]]\ntool = \"a\"\n[pipelines.b]\ndescription = 1",
        r#"
sever = 1

[proxy]
call_timeout_ms = 0
seperator = "--"

[servers.a]
comand = "x"
enabled = "yes"

[servers.b__c]
command = "${MISSING}"
include = ["read_["]
tiers = { "[" = "read", "w*" = "write" }

[servers.d]
url = "ftp://h"
args = []

[pipelines.p]
plan = 3

[http]
tokens = ["short"]
"#,
    ];
    let text: String = configs
        .iter()
        .map(|config| match parse(config) {
            Ok(_) => format!("{}\n=> accepted\n\n", config.trim()),
            Err(e) => format!("{}\n=>\n{e}\n\n", config.trim()),
        })
        .collect();
    insta::assert_snapshot!("config_error_texts", text);
}
