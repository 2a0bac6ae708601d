//! Sign-ins in a real OS keychain: a session bus and GNOME Keyring's Secret Service of this
//! test's own (dbus-daemon, gnome-keyring-daemon, unlocked with a throwaway password), the
//! real authorization server and MCP server of `oauth.rs`. `planmux login` keeps the tokens
//! in the keychain and none in the file; `check` and a plan read them back from there;
//! `secret-tool` finds the item; `logout` deletes it.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use super::oauth::Fixture;
use super::support::Timer;

/// A program this test needs, or a failure that says how to install it.
fn program(name: &str) -> std::path::PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|path| path.exists())
    });
    found.unwrap_or_else(|| {
        panic!(
            "the keychain test needs {name}: run scripts/install-interop (as root it installs \
             the Debian packages dbus, gnome-keyring and libsecret-tools), or install them"
        )
    })
}

/// A session bus and an unlocked Secret Service on it, stopped when dropped.
struct Keyring {
    address: String,
    home: tempfile::TempDir,
    _bus: tokio::process::Child,
    _keyring: tokio::process::Child,
}

impl Keyring {
    async fn start() -> anyhow::Result<Self> {
        let home = tempfile::tempdir()?;
        // The bus starts with the test's own home: a keyring it activates by itself keeps
        // its files there too, never in the user's.
        let mut bus = tokio::process::Command::new(program("dbus-daemon"))
            .args(["--session", "--nofork", "--print-address=1"])
            .env("HOME", home.path())
            .env("XDG_DATA_HOME", home.path().join("data"))
            .env_remove("XDG_RUNTIME_DIR")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = bus
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let address = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await??
            .ok_or_else(|| anyhow::anyhow!("dbus-daemon printed no address"))?;
        let mut keyring = tokio::process::Command::new(program("gnome-keyring-daemon"))
            .args(["--foreground", "--unlock", "--components=secrets"])
            .env("DBUS_SESSION_BUS_ADDRESS", &address)
            .env("HOME", home.path())
            .env("XDG_DATA_HOME", home.path().join("data"))
            .env_remove("GNOME_KEYRING_CONTROL")
            .env_remove("XDG_RUNTIME_DIR")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(home.path().join("keyring.log"))?)
            .kill_on_drop(true)
            .spawn()?;
        if let Some(mut stdin) = keyring.stdin.take() {
            stdin.write_all(b"throwaway-password").await?;
        }
        let keyring = Keyring {
            address,
            home,
            _bus: bus,
            _keyring: keyring,
        };
        // Ready once it owns the Secret Service's name (asked without activating anything:
        // an activated keyring would not be the unlocked one), and a secret goes in and
        // comes back.
        let owned = crate::common::eventually(Duration::from_secs(20), || {
            std::process::Command::new(program("dbus-send"))
                .args([
                    "--session",
                    "--dest=org.freedesktop.DBus",
                    "--print-reply",
                    "/org/freedesktop/DBus",
                    "org.freedesktop.DBus.NameHasOwner",
                    "string:org.freedesktop.secrets",
                ])
                .env("DBUS_SESSION_BUS_ADDRESS", &keyring.address)
                .output()
                .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains("boolean true"))
        })
        .await;
        anyhow::ensure!(
            owned,
            "gnome-keyring-daemon did not take the Secret Service's name: {}",
            keyring.log()
        );
        let mut store = std::process::Command::new(program("secret-tool"))
            .args([
                "store",
                "--label=probe",
                "service",
                "planmux-test",
                "username",
                "probe",
            ])
            .env("DBUS_SESSION_BUS_ADDRESS", &keyring.address)
            .stdin(Stdio::piped())
            .spawn()?;
        if let Some(mut stdin) = store.stdin.take() {
            std::io::Write::write_all(&mut stdin, b"probe-secret")?;
        }
        anyhow::ensure!(
            store.wait()?.success(),
            "secret-tool could not store: {}",
            keyring.log()
        );
        let back = std::process::Command::new(program("secret-tool"))
            .args(["lookup", "service", "planmux-test", "username", "probe"])
            .env("DBUS_SESSION_BUS_ADDRESS", &keyring.address)
            .output()?;
        anyhow::ensure!(
            String::from_utf8_lossy(&back.stdout) == "probe-secret",
            "the keyring does not give back what it took: {}",
            keyring.log()
        );
        Ok(keyring)
    }

    /// What the keyring daemon said.
    fn log(&self) -> String {
        std::fs::read_to_string(self.home.path().join("keyring.log")).unwrap_or_default()
    }

    /// `secret-tool lookup service planmux user ACCOUNT`.
    fn lookup(&self, account: &str) -> Option<String> {
        let out = std::process::Command::new(program("secret-tool"))
            .args(["lookup", "service", "planmux", "username", account])
            .env("DBUS_SESSION_BUS_ADDRESS", &self.address)
            .env("HOME", self.home.path())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

#[tokio::test]
async fn sign_ins_live_in_the_os_keychain_where_there_is_one() -> anyhow::Result<()> {
    let _t = Timer::start("oauth_keychain");
    let keyring = Keyring::start().await?;
    let fixture = Fixture::start().await?;
    let planmux = |args: &[&str]| {
        let mut command = fixture.planmux(args, &fixture.browser(""), "info");
        command
            .env("PLANMUX_KEYCHAIN", "on")
            .env("DBUS_SESSION_BUS_ADDRESS", &keyring.address);
        command
    };
    let run = |args: &'static [&'static str]| {
        let mut command = planmux(args);
        async move {
            let output = tokio::time::timeout(Duration::from_secs(60), command.output()).await??;
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            anyhow::Ok((output.status.success(), text))
        }
    };

    let (ok, said) = run(&["login", "remote"]).await?;
    assert!(ok, "{said}");
    let files: Vec<_> = std::fs::read_dir(fixture.data_home().join("planmux/oauth"))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let file = std::fs::read_to_string(&files[0])?;
    let account = files[0]
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    assert!(
        file.contains("\"in_keychain\": true"),
        "the sign-in is not in the keychain; login said:\n{said}\nthe keyring said:\n{}",
        keyring.log()
    );
    assert!(
        !file.contains("access_token"),
        "a token in the file: {file}"
    );
    let item = keyring.lookup(&account).unwrap_or_default();
    assert!(
        item.contains("access_token") && item.contains("refresh_token"),
        "the keychain item: {} bytes",
        item.len()
    );

    let (ok, said) = run(&["check"]).await?;
    assert!(said.contains("remote  signed in"), "{said}");
    assert!(ok, "{said}");
    let plan = fixture.data_home().join("plan.json");
    std::fs::write(
        &plan,
        r#"{"steps": [{"id": "me", "tool": "remote__whoami"}], "outputs": ["me"]}"#,
    )?;
    let plan = plan.to_string_lossy().into_owned();
    let mut command = planmux(&["run", &plan]);
    let ran = tokio::time::timeout(Duration::from_secs(60), command.output()).await??;
    let out = String::from_utf8_lossy(&ran.stdout);
    assert!(
        ran.status.success() && out.contains("alice"),
        "{out}{}",
        String::from_utf8_lossy(&ran.stderr)
    );

    // Without the keychain, the file says where the sign-in is.
    let mut command = fixture.planmux(&["check"], "false", "warn");
    let elsewhere = tokio::time::timeout(Duration::from_secs(60), command.output()).await??;
    let text = String::from_utf8_lossy(&elsewhere.stdout);
    assert!(text.contains("OS keychain"), "{text}");

    let (ok, said) = run(&["logout", "remote"]).await?;
    assert!(ok, "{said}");
    assert_eq!(keyring.lookup(&account), None, "logout deletes the item");
    Ok(())
}
