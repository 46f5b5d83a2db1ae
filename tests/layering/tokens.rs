//! Rust source as the tokens the module graph reads: identifiers, `::` and punctuation.

#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    Ident(String),
    PathSep,
    Punct(char),
}

/// Identifiers, `::` and single punctuation, with comments, lifetimes and literals dropped.
/// A string that is itself a path (`serialize_with = "crate::a::f"`) is kept as its path.
pub fn tokens(code: &str) -> Vec<Tok> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if ch == 'r'
            && (c.get(i + 1) == Some(&'"') || (c.get(i + 1) == Some(&'#') && c.get(i + 2) != Some(&'[')))
            && (i == 0 || !is_ident(c[i - 1]))
        {
            // Raw string: r"…" or r#"…"#.
            let mut k = i + 1;
            let mut hashes = 0;
            while c.get(k) == Some(&'#') {
                hashes += 1;
                k += 1;
            }
            if c.get(k) != Some(&'"') {
                i += 1;
                continue;
            }
            k += 1;
            while k < c.len() && !(c[k] == '"' && (0..hashes).all(|h| c.get(k + 1 + h) == Some(&'#'))) {
                k += 1;
            }
            i = k + 1 + hashes;
        } else if ch == '"' {
            let mut k = i + 1;
            let mut s = String::new();
            while k < c.len() && c[k] != '"' {
                if c[k] == '\\' {
                    k += 1;
                }
                s.push(c[k]);
                k += 1;
            }
            if s.contains("::") && s.chars().all(|x| is_ident(x) || x == ':') {
                out.extend(tokens(&s));
            }
            i = k + 1;
        } else if ch == '\'' {
            // A char literal ('a', '\n', '{') or a lifetime ('a): either way no path.
            if c.get(i + 1) == Some(&'\\') {
                let mut k = i + 2;
                while k < c.len() && c[k] != '\'' {
                    k += 1;
                }
                i = k + 1;
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < c.len() && is_ident(c[i]) {
                    i += 1;
                }
            }
        } else if ch == '$' || is_ident(ch) {
            let mut k = i + 1;
            while k < c.len() && is_ident(c[k]) {
                k += 1;
            }
            let word: String = c[i..k].iter().collect();
            if !word.starts_with(|x: char| x.is_ascii_digit()) {
                out.push(Tok::Ident(word));
            }
            i = k;
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push(Tok::PathSep);
            i += 2;
        } else {
            if !ch.is_whitespace() {
                out.push(Tok::Punct(ch));
            }
            i += 1;
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}
