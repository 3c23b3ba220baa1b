//! memdir's derived search: everything here can be rebuilt from the files.
//!
//! Two tantivy indexes (session chunks, category documents) derived from the store's files
//! ([`index`]), the query planning, ranking, windows and fusion over them ([`search`]), answer
//! budgets ([`budget`]), and the dense side: quantized vectors ([`vector`]) and embedders
//! ([`embed`]; candle behind the `local-embeddings` feature). Nothing here knows of the ledger:
//! what was indexed up to where is kept in the index's own metadata.
#![forbid(unsafe_code)]

pub mod budget;
pub mod embed;
pub mod index;
pub mod search;
pub mod vector;
