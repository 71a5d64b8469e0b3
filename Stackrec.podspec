# Stackrec.podspec: the Swift module Stackrec over prebuilt XCFrameworks of
# the recorder (CStackrec), zstd and protobuf-c, for iOS apps that use
# CocoaPods. NOT RUN HERE (no Mac, no CocoaPods in this repository's CI):
# see docs/ios.md for the steps and what still needs a Mac.
#
# Before `pod install`, build the frameworks into swift/xcframeworks/:
#   cmake/ios/build-xcframeworks.sh ZSTD_SRC PROTOBUF_C_SRC swift/xcframeworks
# then in the app's Podfile:
#   pod 'Stackrec', :path => '../stackrec'
Pod::Spec.new do |s|
  s.name         = 'Stackrec'
  s.version      = '0.3.0' # = STKR_VERSION_* in recorder/stackrec.h
  s.summary      = 'Records call stacks at hook sites (privacy-sensitive APIs, I/O, ...).'
  s.homepage     = 'https://example.invalid/stackrec' # TODO: the repository's URL
  s.license      = { :type => 'TODO', :text => 'TODO: the repository has no LICENSE file yet' }
  s.author       = 'stackrec'
  s.source       = { :git => 'https://example.invalid/stackrec.git', :tag => s.version.to_s }
  s.ios.deployment_target = '15.0'
  s.swift_version = '5.9'
  s.source_files = 'swift/Sources/Stackrec/*.swift'
  s.vendored_frameworks = [
    'swift/xcframeworks/CStackrec.xcframework',
    'swift/xcframeworks/zstd.xcframework',
    'swift/xcframeworks/protobuf_c.xcframework',
  ]
  # symbolize/symbolize_apple.c: the Objective-C runtime and Foundation.
  s.libraries    = 'objc'
  s.frameworks   = 'Foundation'
  # The app's own Swift code needs -Xfrontend -swift-async-frame-pointer=always
  # for its awaiting callers to show (docs/ios.md); a pod does not change
  # the app's build settings.
end
