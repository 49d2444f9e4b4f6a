//! Okapi BM25 over a tokenised corpus, with an inverted index built once per task.
//!
//! ```text
//!  score(D, Q) = Σ_{t ∈ Q, distinct} IDF(t) · tf(t, D)·(k1 + 1) / (tf(t, D) + k1·(1 − b + b·|D| / avgdl))
//!  IDF(t)      = ln(1 + (N − n(t) + 0.5) / (n(t) + 0.5))        (Robertson IDF, +1 smoothing: never negative)
//!  k1 = 1.2, b = 0.75; tokens: lowercase runs of letters and digits
//! ```
//!
//! A query term counts once however often it is repeated; documents with score 0 (no query
//! term) are never returned; ties rank the lower document number first.

use std::collections::HashMap;

/// Term-frequency saturation.
pub const K1: f64 = 1.2;
/// Length normalisation.
pub const B: f64 = 0.75;

/// The tokens of `text`: lowercase runs of alphanumeric characters.
pub fn tokenize(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()).map(str::to_lowercase)
}

/// An inverted index with precomputed IDF and length norms.
#[derive(Debug, Clone, Default)]
pub struct Bm25 {
    terms: HashMap<String, usize>,
    postings: Vec<Vec<(u32, u32)>>,
    idf: Vec<f64>,
    /// Per document: k1·(1 − b + b·|D|/avgdl), the tf-independent part of the denominator.
    norm: Vec<f64>,
}

impl Bm25 {
    /// Indexes `docs` (document number = position).
    pub fn new<S: AsRef<str>>(docs: &[S]) -> Self {
        let mut terms: HashMap<String, usize> = HashMap::new();
        let mut postings: Vec<Vec<(u32, u32)>> = Vec::new();
        let mut lengths = Vec::with_capacity(docs.len());
        for (d, doc) in docs.iter().enumerate() {
            let mut len = 0u32;
            for token in tokenize(doc.as_ref()) {
                len += 1;
                let next = postings.len();
                let t = *terms.entry(token).or_insert(next);
                if t == next {
                    postings.push(Vec::new());
                }
                match postings[t].last_mut() {
                    Some((doc, tf)) if *doc == d as u32 => *tf += 1,
                    _ => postings[t].push((d as u32, 1)),
                }
            }
            lengths.push(f64::from(len));
        }
        let n = docs.len() as f64;
        let avgdl = if docs.is_empty() { 1.0 } else { lengths.iter().sum::<f64>() / n }.max(f64::MIN_POSITIVE);
        let idf = postings.iter().map(|p| idf(n, p.len() as f64)).collect();
        let norm = lengths.iter().map(|len| K1 * (1.0 - B + B * len / avgdl)).collect();
        Self { terms, postings, idf, norm }
    }

    /// How many documents are indexed.
    pub fn len(&self) -> usize {
        self.norm.len()
    }

    /// Whether no document is indexed.
    pub fn is_empty(&self) -> bool {
        self.norm.is_empty()
    }

    /// The BM25 score of every document for `query`.
    pub fn scores(&self, query: &str) -> Vec<f64> {
        let mut scores = vec![0.0; self.len()];
        let mut done: Vec<usize> = Vec::new();
        for token in tokenize(query) {
            let Some(&t) = self.terms.get(&token) else { continue };
            if done.contains(&t) {
                continue;
            }
            done.push(t);
            let idf = self.idf[t];
            for &(d, tf) in &self.postings[t] {
                let tf = f64::from(tf);
                if let (Some(s), Some(norm)) = (scores.get_mut(d as usize), self.norm.get(d as usize)) {
                    *s += idf * tf * (K1 + 1.0) / (tf + norm);
                }
            }
        }
        scores
    }

    /// The `k` best documents for `query` with their scores, best first; only documents
    /// that contain a query term.
    pub fn top_k(&self, query: &str, k: usize) -> Vec<(usize, f64)> {
        let mut ranked: Vec<(usize, f64)> =
            self.scores(query).into_iter().enumerate().filter(|(_, s)| *s > 0.0).collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.truncate(k);
        ranked
    }
}

/// Robertson IDF with +1 smoothing for a term in `df` of `n` documents.
pub fn idf(n: f64, df: f64) -> f64 {
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}
