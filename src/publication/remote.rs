//! The remote of a publication: a URL, never a remote name.
//!
//! A remote *name* (`origin`) is resolved through the repository's config,
//! which the checked party may have shaped (`url.<base>.insteadOf`,
//! `remote.origin.pushurl`); a URL is what the reviewer of the contract
//! read. Only the transports git implements itself are accepted: `file`,
//! `git`, `ssh`, `http` and `https`. Transport helpers (`ext::` runs a
//! command) and scp-like `host:path` (ambiguous with a local path) are
//! refused with what to write instead.
//!
//! Credentials never leave this type: [`RemoteUrl::redacted`] is the URL
//! without its userinfo, the only form written into the canonical text,
//! evidence, journals and messages. A query or fragment is refused, since a
//! token there could not be told from the path.

use std::fmt;

/// Longest URL accepted, in bytes.
pub const MAX_URL_LEN: usize = 2048;

/// The transports a publication may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// `file:///absolute/path` (a repository on this machine).
    File,
    /// `git://host[:port]/path` (git daemon; unauthenticated).
    Git,
    /// `ssh://[user@]host[:port]/path`.
    Ssh,
    /// `http://host[:port]/path` (smart HTTP).
    Http,
    /// `https://host[:port]/path` (smart HTTP over TLS).
    Https,
}

impl Scheme {
    /// The URL scheme, also git's `protocol.<name>.allow` key.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::File => "file",
            Scheme::Git => "git",
            Scheme::Ssh => "ssh",
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    fn from_name(name: &str) -> Option<Scheme> {
        Some(match name {
            "file" => Scheme::File,
            "git" => Scheme::Git,
            "ssh" => Scheme::Ssh,
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            _ => return None,
        })
    }
}

/// A validated remote URL. Its `Debug` and `Display` show only the
/// redacted form.
#[derive(Clone, PartialEq, Eq)]
pub struct RemoteUrl {
    raw: String,
    redacted: String,
    scheme: Scheme,
    userinfo: Option<String>,
}

impl fmt::Debug for RemoteUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RemoteUrl({:?})", self.redacted)
    }
}

impl fmt::Display for RemoteUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted)
    }
}

impl RemoteUrl {
    /// Validates `text`; the error says what to write instead.
    pub fn parse(text: &str) -> Result<RemoteUrl, String> {
        if text.is_empty() {
            return Err(
                "must be a URL such as https://host/owner/repo.git, found an empty string".into(),
            );
        }
        if text.len() > MAX_URL_LEN {
            return Err(format!("is longer than {MAX_URL_LEN} bytes"));
        }
        if let Some(c) = text
            .chars()
            .find(|c| !c.is_ascii() || c.is_ascii_control() || *c == ' ')
        {
            return Err(format!(
                "contains {c:?}; a URL is printable ASCII without spaces (percent-encode the rest)"
            ));
        }
        let Some((scheme, rest)) = text.split_once("://") else {
            return Err(if text.contains("::") {
                "is a transport helper (such as ext::, which runs a command); only file, git, \
                 ssh, http and https URLs are accepted"
                    .into()
            } else if let Some((scheme, after)) = text.split_once(':')
                && Scheme::from_name(scheme).is_some()
            {
                format!(
                    "is missing the // after {scheme}:; write it as {scheme}://{}",
                    after.trim_start_matches('/')
                )
            } else if text.contains(':') {
                format!(
                    "looks like an scp-style address; write it as ssh://{}",
                    text.replacen(':', "/", 1)
                )
            } else {
                "is a remote name or a path, not a URL; a publication names its remote by URL \
                 (file:///absolute/path for a repository on this machine), never through the \
                 repository's config"
                    .into()
            });
        };
        let Some(kind) = Scheme::from_name(scheme) else {
            return Err(format!(
                "has the scheme {scheme:?}; only file, git, ssh, http and https are accepted"
            ));
        };
        if text.contains('?') || text.contains('#') {
            return Err(
                "has a query or fragment; they are refused (a token there would be recorded as \
                 the address)"
                    .into(),
            );
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if path.len() <= 1 {
            return Err("names no repository path after the host".into());
        }
        let (userinfo, hostport) = match authority.rfind('@') {
            Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
            None => (None, authority),
        };
        check_host(kind, hostport, userinfo.is_some())?;
        if userinfo.is_some_and(|u| u.contains('%')) {
            // git rewrites percent-escapes in what it prints (upper-case
            // hex, unreserved characters decoded), so a credential written
            // escaped could not be scrubbed from its messages: refused.
            return Err(
                "has a percent-escape in its userinfo, which is refused (git rewrites escapes in \
                 its messages, so such a credential could leak into the records); give a \
                 credential that needs escaping through the environment instead (a \
                 credential.helper, GIT_ASKPASS or http.extraHeader, see \
                 docs/reference/publication.md)"
                    .into(),
            );
        }
        let redacted = format!("{scheme}://{hostport}{path}");
        Ok(RemoteUrl {
            raw: text.to_owned(),
            redacted,
            scheme: kind,
            userinfo: userinfo.map(str::to_owned),
        })
    }

    /// The URL as written, credentials included: only for git's command
    /// line, never for anything recorded or shown.
    pub(crate) fn raw(&self) -> &str {
        &self.raw
    }

    /// The URL without userinfo: what every record and message shows.
    pub fn redacted(&self) -> &str {
        &self.redacted
    }

    /// The transport.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// `text` with every appearance of the raw URL and of its userinfo
    /// replaced (git's messages quote the URL it was given).
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.replace(&self.raw, &self.redacted);
        if let Some(info) = self.userinfo.as_deref().filter(|i| !i.is_empty()) {
            out = out.replace(info, "***");
            // The password alone (`user:secret`) may be quoted too.
            if let Some((_, secret)) = info.split_once(':').filter(|(_, s)| !s.is_empty()) {
                out = out.replace(secret, "***");
            }
        }
        out
    }
}

fn check_host(kind: Scheme, hostport: &str, has_userinfo: bool) -> Result<(), String> {
    if kind == Scheme::File {
        if has_userinfo {
            return Err("a file:// URL has no userinfo".into());
        }
        if !(hostport.is_empty() || hostport == "localhost") {
            return Err(format!(
                "a file:// URL names a path on this machine (file:///path), found the host \
                 {hostport:?}"
            ));
        }
        return Ok(());
    }
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let Some((inside, after)) = v6.split_once(']') else {
            return Err("has an unclosed [ in its host".into());
        };
        if inside.is_empty() || !inside.chars().all(|c| c.is_ascii_hexdigit() || c == ':') {
            return Err(format!("has the invalid IPv6 host [{inside}]"));
        }
        (inside, after.strip_prefix(':'))
    } else {
        match hostport.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    if host.is_empty() {
        return Err("names no host".into());
    }
    if host.starts_with('-') {
        // git refuses such hosts for ssh (an option injection); so do we.
        return Err("has a host starting with '-'".into());
    }
    if !hostport.starts_with('[')
        && !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_')
    {
        return Err(format!("has the invalid host {host:?}"));
    }
    if let Some(port) = port
        && !port.parse::<u16>().is_ok_and(|p| p > 0)
    {
        return Err(format!("has the invalid port {port:?}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_userinfo_from_everything_shown() {
        let url = RemoteUrl::parse("https://bot:s3cr3t@example.com/team/repo.git").unwrap();
        assert_eq!(url.redacted(), "https://example.com/team/repo.git");
        assert_eq!(format!("{url} {url:?}").matches("s3cr3t").count(), 0);
        let said = "fatal: Authentication failed for 'https://bot:s3cr3t@example.com/team/repo.git/' (s3cr3t)";
        let scrubbed = url.scrub(said);
        assert!(!scrubbed.contains("s3cr3t"), "{scrubbed}");
        assert!(scrubbed.contains("https://example.com/team/repo.git"));
    }

    #[test]
    fn accepts_the_five_transports() {
        for ok in [
            "file:///srv/git/repo.git",
            "file://localhost/srv/repo",
            "git://127.0.0.1:9418/repo.git",
            "ssh://git@example.com:2222/team/repo.git",
            "http://[::1]:8080/repo.git",
            "https://example.com/team/repo.git",
        ] {
            assert!(RemoteUrl::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn refuses_names_helpers_scp_queries_and_odd_hosts() {
        for (bad, says) in [
            ("origin", "remote name"),
            ("/srv/repo.git", "remote name"),
            ("git@example.com:team/repo.git", "ssh://"),
            ("ext::sh%20-c%20touch", "transport helper"),
            ("ftp://example.com/repo", "scheme"),
            ("https://example.com/repo?token=x", "query"),
            ("https://example.com/repo#x", "query"),
            ("file://otherhost/srv/repo", "this machine"),
            ("ssh://-oProxyCommand=x/repo", "'-'"),
            ("https://example.com", "no repository path"),
            ("https://example.com:99999/r", "port"),
            ("https://exa mple.com/r", "spaces"),
            (
                "https://bot:ghp%5FSECRET%21@example.com/r",
                "percent-escape",
            ),
            ("https://b%6Ft@example.com/r", "percent-escape"),
            ("https:/example.com/r", "write it as https://example.com/r"),
        ] {
            let err = RemoteUrl::parse(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
