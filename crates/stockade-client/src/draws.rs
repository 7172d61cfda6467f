//! The draw routes of the typed client: entering a draw sale, a buyer's
//! entry, and the published draw.

use reqwest::Method;

use super::{Client, Credential, Reply, body, read, send};
use stockade_api::{DrawBody, EntryBody, EntryRequest};

impl Client {
    /// `POST /v1/sales/{id}/entries`: 201 entered, 200 the buyer's entry
    /// of before.
    pub async fn enter_draw(
        &self,
        sale: &str,
        entry: &EntryRequest,
    ) -> Result<Reply<EntryBody>, super::ClientError> {
        let url = self.url(&["/v1/sales/", "/entries"], &[sale]);
        let request = self
            .request(Method::POST, url, Credential::Buyer)
            .json(entry);
        read(send(request).await?).await
    }

    /// `GET /v1/sales/{id}/entries/me`: the entry of `user` (identity
    /// off), or of the bearer token's buyer.
    pub async fn my_entry(
        &self,
        sale: &str,
        user: Option<&str>,
    ) -> Result<EntryBody, super::ClientError> {
        let url = self.url(&["/v1/sales/", "/entries/me"], &[sale]);
        let mut request = self.request(Method::GET, url, Credential::Buyer);
        if let Some(user) = user {
            request = request.query(&[("user_id", user)]);
        }
        body(request).await
    }

    /// `GET /v1/sales/{id}/draw`: the draw's terms, and once made its seed
    /// and every entry in its order (the pages followed to the last).
    pub async fn draw(&self, sale: &str) -> Result<DrawBody, super::ClientError> {
        let url = self.url(&["/v1/sales/", "/draw"], &[sale]);
        let mut draw: DrawBody =
            body(self.request(Method::GET, url.clone(), Credential::None)).await?;
        while let Some(after) = draw.next_after.take() {
            let request = self
                .request(Method::GET, url.clone(), Credential::None)
                .query(&[("after", after)]);
            let page: DrawBody = body(request).await?;
            draw.order.extend(page.order);
            draw.next_after = page.next_after;
        }
        Ok(draw)
    }
}
