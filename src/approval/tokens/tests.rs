//! The tokens' tests: single use, owners, channels, bounds.

use serde_json::json;

use super::*;
use crate::approval::digest;
use crate::approval::fixtures::{request, steps_of};
use crate::policy::Tier;

#[tokio::test]
async fn a_token_runs_its_plan_once_with_the_steps_repeated() {
    let tokens = Tokens::default();
    let asked = request(&[("w", "fs__write", Tier::Write)]);
    let steps = steps_of(&asked);
    let token = tokens
        .issue(asked.clone(), json!({"plan": 1}), Channel::Model, None)
        .await
        .unwrap_or_default();
    assert!(token.starts_with("pa_") && token.len() == 35, "{token}");
    assert_eq!(
        tokens.redeem_steps("pa_nope", &steps, None, None).await,
        Err(TokenError::Unknown)
    );
    // A host token is not the model's to redeem, and the other way round.
    assert_eq!(
        tokens.redeem_digest(&token, &asked.digest, None).await,
        Err(TokenError::Unknown)
    );
    let mut changed = steps.clone();
    changed[0]["args"]["path"] = json!("/etc/passwd");
    assert_eq!(
        tokens.redeem_steps(&token, &changed, None, None).await,
        Err(TokenError::Mismatch("step 'w' differs in 'args'".into()))
    );
    assert!(matches!(
        tokens.redeem_steps(&token, &json!([]), None, None).await,
        Err(TokenError::Mismatch(_))
    ));
    assert!(matches!(
        tokens
            .redeem_steps(&token, &steps, Some(&json!({"x": 1})), None)
            .await,
        Err(TokenError::Mismatch(_))
    ));
    // Repeated as JSON text, and with 420.0 written back as 420: the same steps.
    let text = serde_json::to_string(&steps)
        .unwrap_or_default()
        .replace("420.0", "420");
    let (got, arguments) = tokens
        .redeem_steps(&token, &Value::String(text), None, None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got, asked);
    assert_eq!(arguments, json!({"plan": 1}));
    assert_eq!(
        tokens.redeem_steps(&token, &steps, None, None).await,
        Err(TokenError::Used)
    );
}

#[tokio::test]
async fn a_host_token_is_bound_to_the_plan_digest_and_expires() {
    let tokens = Tokens::with_ttl(Duration::ZERO);
    let asked = request(&[("rm", "fs__rm", Tier::Destructive)]);
    let token = tokens
        .issue(asked.clone(), Value::Null, Channel::Host, None)
        .await
        .unwrap_or_default();
    std::thread::sleep(Duration::from_millis(5));
    assert!(matches!(
        tokens.redeem_digest(&token, &asked.digest, None).await,
        Err(TokenError::Expired(_))
    ));
    let tokens = Tokens::default();
    let token = tokens
        .issue(asked.clone(), Value::Null, Channel::Host, None)
        .await
        .unwrap_or_default();
    assert_eq!(
        tokens
            .redeem_digest(&token, &digest(&json!({"other": true})), None)
            .await,
        Err(TokenError::OtherPlan)
    );
    assert_eq!(
        tokens.redeem_digest(&token, &asked.digest, None).await,
        Ok(asked)
    );
}

/// Over HTTP a token is redeemed only in the session it was handed to: in another,
/// it is as unknown as a made-up one, and stays good for its own.
#[tokio::test]
async fn a_token_is_redeemed_only_by_its_session() {
    let tokens = Tokens::default();
    let asked = request(&[("w", "fs__write", Tier::Write)]);
    let token = tokens
        .issue(
            asked.clone(),
            Value::Null,
            Channel::Model,
            Some(Owner::Session(1)),
        )
        .await
        .unwrap_or_default();
    let steps = steps_of(&asked);
    for other in [Some(Owner::Session(2)), None] {
        assert_eq!(
            tokens.redeem_steps(&token, &steps, None, other).await,
            Err(TokenError::Unknown)
        );
    }
    assert!(
        tokens
            .redeem_steps(&token, &steps, None, Some(Owner::Session(1)))
            .await
            .is_ok()
    );
    let host = tokens
        .issue(
            asked.clone(),
            Value::Null,
            Channel::Host,
            Some(Owner::Session(1)),
        )
        .await
        .unwrap_or_default();
    assert_eq!(
        tokens
            .redeem_digest(&host, &asked.digest, Some(Owner::Session(2)))
            .await,
        Err(TokenError::Unknown)
    );
    assert!(
        tokens
            .redeem_digest(&host, &asked.digest, Some(Owner::Session(1)))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn tokens_are_bounded_and_the_oldest_go_first() {
    let tokens = Tokens::default();
    let asked = request(&[("w", "fs__write", Tier::Write)]);
    let first = tokens
        .issue(asked.clone(), Value::Null, Channel::Model, None)
        .await
        .unwrap_or_default();
    for _ in 0..MAX_TOKENS {
        let _ = tokens
            .issue(asked.clone(), Value::Null, Channel::Model, None)
            .await;
    }
    assert_eq!(tokens.lock().len(), MAX_TOKENS);
    assert_eq!(
        tokens
            .redeem_steps(&first, &steps_of(&asked), None, None)
            .await,
        Err(TokenError::Unknown)
    );
}

#[tokio::test]
async fn the_console_settles_a_token_once_and_later_uses_are_told_how() {
    let tokens = Tokens::default();
    let asked = request(&[("w", "fs__write", Tier::Write)]);
    let steps = steps_of(&asked);
    let token = tokens
        .issue(asked.clone(), json!({"plan": 2}), Channel::Model, None)
        .await
        .unwrap_or_default();
    let waiting = tokens.waiting().await.unwrap_or_default();
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0].token, token);
    assert_eq!(waiting[0].request, asked);
    let (request, arguments) = tokens
        .settle(&token, "approved on the console")
        .await
        .expect("settled");
    assert_eq!((request, arguments), (asked, json!({"plan": 2})));
    assert!(tokens.waiting().await.unwrap_or_default().is_empty());
    assert_eq!(
        tokens.settle(&token, "declined").await.map(|_| ()),
        Err(TokenError::Used)
    );
    tokens
        .note(&token, "approved on the console, and its plan ran".into())
        .await;
    assert_eq!(
        tokens.redeem_steps(&token, &steps, None, None).await,
        Err(TokenError::Settled(
            "approved on the console, and its plan ran".into()
        ))
    );
    assert_eq!(
        tokens.settle("pa_nope", "x").await.map(|_| ()),
        Err(TokenError::Unknown)
    );
}
