"""clinrag's clinical knowledge base: common and can't-miss conditions written as data from guidelines and
reviews, every fact citing a document of one registry of sources (`data/`, see its README), read by
`catalogue`, checked by `audit`."""
