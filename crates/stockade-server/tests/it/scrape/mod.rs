//! Reading `/metrics`: the Prometheus text format parsed into samples.

#![allow(dead_code)]

use std::collections::BTreeMap;

use crate::common::TestServer;

/// The samples of the server's `/metrics`.
pub async fn scrape(server: &TestServer) -> Scrape {
    Scrape::parse(&server.metrics_text().await)
}

/// One sample line of the Prometheus text format.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// A parsed `/metrics` answer.
#[derive(Debug, Clone)]
pub struct Scrape {
    pub text: String,
    pub samples: Vec<Sample>,
}

impl Scrape {
    pub fn parse(text: &str) -> Self {
        let samples = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|line| {
                let (series, value) = line.rsplit_once(' ').unwrap();
                let (name, labels) = match series.split_once('{') {
                    Some((name, rest)) => {
                        let body = rest.strip_suffix('}').unwrap();
                        let labels = body
                            .split("\",")
                            .filter(|p| !p.is_empty())
                            .map(|pair| {
                                let (k, v) = pair.split_once("=\"").unwrap();
                                (k.to_owned(), v.trim_end_matches('"').to_owned())
                            })
                            .collect();
                        (name.to_owned(), labels)
                    }
                    None => (series.to_owned(), BTreeMap::new()),
                };
                Sample {
                    name,
                    labels,
                    value: value.parse().unwrap(),
                }
            })
            .collect();
        Self {
            text: text.to_owned(),
            samples,
        }
    }

    /// The value of the sample named `name` with exactly these labels.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.samples
            .iter()
            .find(|s| {
                s.name == name
                    && s.labels.len() == labels.len()
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|s| s.value)
    }

    /// Whether any sample is named `name`.
    pub fn has(&self, name: &str) -> bool {
        self.samples.iter().any(|s| s.name == name)
    }

    /// Whether any sample has label `key` = `value`.
    pub fn has_label(&self, key: &str, value: &str) -> bool {
        self.samples
            .iter()
            .any(|s| s.labels.get(key).map(String::as_str) == Some(value))
    }
}
