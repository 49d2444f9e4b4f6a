//! A generated web site, compiled once per task so that stepping is lookups and copies: every
//! page is rendered to text up front, its lines lowercased for `find`, and every URL (pages and
//! dead links alike) interned to a number.
//!
//! ```text
//!  Department of Physics                      ← title
//!  URL: /departments/physics
//!
//!  The Department of Physics at … has …       ← paragraphs
//!
//!  | Name | Role | Office | Phone | Joined |   ← table (first row: header)
//!  | Ada Brandt | Reader | B-214 | 555-0142 | 2009 |
//!
//!  Links:
//!  - [Staff directory](/departments/physics/staff)
//! ```

use std::collections::HashMap;

/// A link as a page shows it: `[text](url)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The link text.
    pub text: String,
    /// The target, a site-relative URL.
    pub url: String,
}

/// One page before compilation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Page {
    /// Its site-relative URL, e.g. `/people/ada-brandt`.
    pub url: String,
    /// Its title.
    pub title: String,
    /// Paragraphs of text.
    pub paragraphs: Vec<String>,
    /// Table rows, the first being the header; empty for no table.
    pub table: Vec<Vec<String>>,
    /// Outgoing links.
    pub links: Vec<Link>,
}

impl Page {
    /// The page as the agent sees it.
    pub fn render(&self) -> String {
        let mut out = format!("{}\nURL: {}\n", self.title, self.url);
        for p in &self.paragraphs {
            out.push('\n');
            out.push_str(p);
            out.push('\n');
        }
        if !self.table.is_empty() {
            out.push('\n');
            for row in &self.table {
                out.push_str("| ");
                out.push_str(&row.join(" | "));
                out.push_str(" |\n");
            }
        }
        if !self.links.is_empty() {
            out.push_str("\nLinks:\n");
            for l in &self.links {
                out.push_str(&format!("- [{}]({})\n", l.text, l.url));
            }
        }
        out
    }
}

/// A compiled site: pages by number (the home page is 0), rendered text, lowercased lines and
/// interned link targets. URL numbers below the page count are pages; the rest are dead links.
#[derive(Debug, Clone)]
pub struct Site {
    pages: Vec<Page>,
    rendered: Vec<String>,
    lines: Vec<Vec<(String, String)>>,
    links: Vec<Vec<usize>>,
    urls: Vec<String>,
    ids: HashMap<String, usize>,
}

impl Site {
    /// Compiles `pages` (the first must be the home page, `/`).
    pub fn new(pages: Vec<Page>) -> Self {
        let mut urls: Vec<String> = pages.iter().map(|p| p.url.clone()).collect();
        let mut ids: HashMap<String, usize> = urls.iter().enumerate().map(|(i, u)| (u.clone(), i)).collect();
        let mut links = Vec::with_capacity(pages.len());
        for page in &pages {
            let mut out = Vec::with_capacity(page.links.len());
            for link in &page.links {
                let id = *ids.entry(link.url.clone()).or_insert_with(|| {
                    urls.push(link.url.clone());
                    urls.len() - 1
                });
                out.push(id);
            }
            links.push(out);
        }
        let rendered: Vec<String> = pages.iter().map(Page::render).collect();
        let lines = rendered
            .iter()
            .map(|r| r.lines().filter(|l| !l.trim().is_empty()).map(|l| (l.to_string(), l.to_lowercase())).collect())
            .collect();
        Self { pages, rendered, lines, links, urls, ids }
    }

    /// How many pages (not counting dead links).
    pub fn len(&self) -> usize {
        self.pages.len()
    }

    /// Whether the site has no page.
    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// How many URLs are known: pages and dead links.
    pub fn url_count(&self) -> usize {
        self.urls.len()
    }

    /// The number of a (normalised) URL, page or dead link.
    pub fn id(&self, url: &str) -> Option<usize> {
        self.ids.get(url).copied()
    }

    /// Whether URL number `id` is a page (else a dead link).
    pub fn is_page(&self, id: usize) -> bool {
        id < self.pages.len()
    }

    /// The URL of number `id`.
    pub fn url(&self, id: usize) -> &str {
        self.urls.get(id).map_or("", String::as_str)
    }

    /// Page `id` before rendering.
    pub fn page(&self, id: usize) -> Option<&Page> {
        self.pages.get(id)
    }

    /// Page `id` as the agent sees it.
    pub fn rendered(&self, id: usize) -> &str {
        self.rendered.get(id).map_or("", String::as_str)
    }

    /// The URL numbers page `id` links to.
    pub fn links(&self, id: usize) -> &[usize] {
        self.links.get(id).map_or(&[], Vec::as_slice)
    }

    /// The lines of page `id` that contain `needle_lower` (already lowercased).
    pub fn find<'a>(&'a self, id: usize, needle_lower: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.lines
            .get(id)
            .into_iter()
            .flatten()
            .filter(move |(_, low)| low.contains(needle_lower))
            .map(|(l, _)| l.as_str())
    }
}

/// The canonical form of a URL the agent typed: scheme and host dropped, no fragment or query,
/// a leading `/`, no trailing `/`, lowercase, and a markdown link `[text](url)` reduced to url.
pub fn normalize_url(raw: &str) -> String {
    let mut u = raw.trim();
    if let (Some(open), true) = (u.find("]("), u.ends_with(')')) {
        u = &u[open + 2..u.len() - 1];
    }
    for scheme in ["https://", "http://"] {
        if let Some(rest) = u.strip_prefix(scheme) {
            u = rest.find('/').map_or("", |i| &rest[i..]);
        }
    }
    if let Some(i) = u.find(['#', '?']) {
        u = &u[..i];
    }
    let u = u.trim().trim_end_matches('/');
    let mut out = String::with_capacity(u.len() + 1);
    if !u.starts_with('/') {
        out.push('/');
    }
    out.push_str(&u.to_lowercase());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_normalised() {
        assert_eq!(normalize_url(" /People/Ada/ "), "/people/ada");
        assert_eq!(normalize_url("https://site.edu/a/b?x=1#top"), "/a/b");
        assert_eq!(normalize_url("[Ada](/people/ada)"), "/people/ada");
        assert_eq!(normalize_url("departments"), "/departments");
        assert_eq!(normalize_url("/"), "/");
        assert_eq!(normalize_url("http://host"), "/");
    }

    #[test]
    fn pages_render_and_links_intern() {
        let home = Page {
            url: "/".into(),
            title: "Home".into(),
            paragraphs: vec!["Hello.".into()],
            table: vec![vec!["A".into(), "B".into()], vec!["1".into(), "2".into()]],
            links: vec![Link { text: "Gone".into(), url: "/gone".into() }],
        };
        let site = Site::new(vec![home]);
        assert_eq!(site.rendered(0), "Home\nURL: /\n\nHello.\n\n| A | B |\n| 1 | 2 |\n\nLinks:\n- [Gone](/gone)\n");
        assert_eq!((site.len(), site.url_count(), site.id("/gone")), (1, 2, Some(1)));
        assert!(!site.is_page(1));
        assert_eq!(site.find(0, "| 1").collect::<Vec<_>>(), vec!["| 1 | 2 |"]);
    }
}
