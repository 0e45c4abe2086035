// Asio's SSL layer compiled once (the rest of Asio is in daemon/asio/asio_impl.cpp, which stays
// free of OpenSSL): every target that speaks TLS through Asio or Beast links mh_asio_ssl.
#include <boost/asio/ssl/impl/src.hpp>
