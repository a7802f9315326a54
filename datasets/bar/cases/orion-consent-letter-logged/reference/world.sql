-- Applied to the world's database (world.toml `database`) to make the reference world.
INSERT INTO consent_requests (contract_id, counterparty_id, status, requested_on, responded_on, letter_path, note)
VALUES (4, 6, 'drafted', NULL, NULL, 'drafts/orion-consent-request.md', 'Consent request under clause 10.2, drafted');
