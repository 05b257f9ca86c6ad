-- hamming: popcount of the XOR over all 64 bits, negative values included
SELECT hamming(0, 0), hamming(0, 1), hamming(0, -1), hamming(-1, -1);
SELECT hamming(-9223372036854775808, 0), hamming(9223372036854775807, -9223372036854775808);
SELECT hamming(6148914691236517205, -6148914691236517206);  -- 0x5555... vs 0xAAAA...
SELECT hamming(NULL, 0), hamming(0, NULL);

-- simhash_bits: most significant bit first
SELECT simhash_bits(0), simhash_bits(1);
SELECT simhash_bits(-1), simhash_bits(-9223372036854775808);
SELECT simhash_bits(NULL);

-- simhash_from_bits is the inverse of simhash_bits
SELECT v, simhash_from_bits(simhash_bits(v)) = v AS round_trip
FROM (VALUES (0::bigint), (1), (-1), (42), (-9223372036854775808), (9223372036854775807)) AS t(v);
SELECT simhash_from_bits('0011111101011101000101010000111101110110010010010101110010000011');
SELECT simhash_from_bits(NULL);

-- and rejects anything but 64 characters 0 or 1
SELECT simhash_from_bits('');
SELECT simhash_from_bits('0101');
SELECT simhash_from_bits(repeat('0', 65));
SELECT simhash_from_bits(repeat('0', 10) || '2' || repeat('0', 53));
SELECT simhash_from_bits(' ' || repeat('0', 63));
SELECT simhash_from_bits(repeat('0', 63) || 'é');
SELECT simhash_from_bits(repeat('0', 32) || ' ' || repeat('0', 32));
